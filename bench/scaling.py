#!/usr/bin/env python
"""How a QLoRA step's cost grows with sequence length and batch: lorakit (chunked loss, the job's default) against PEFT + bitsandbytes.

    python bench/scaling.py                 # seq 256..2048 at batch 1 and 2, and batch 1, 2, 4 at seq 512 (long: hours on 2 cores)
    python bench/scaling.py --quick         # seq 256 and 512 at batch 1, one round, 2 timed steps: a check that it runs
    python bench/scaling.py --plot nbs/images/scaling.png   # also draw time and memory against tokens
    python bench/scaling.py --shapes 1x256,1x512,1x1024,1x2048,2x256,4x512 --rounds 1   # a subset (under an hour)

SmolLM2-135M-Instruct, all-linear LoRA r 8, CPU float32; both sides built by `bench/real.py`'s `build` ('chunked' and
'peft'), the same random tokens, AdamW. Each configuration runs in its own process (`bench/malloc.py`'s worker), with
`trim_malloc()` called after loading on both sides, so that peak RSS follows the live tensors (the job does the same);
the configurations in turn, `--rounds` times; medians. Columns:
- ms/step and tokens/s of each side, and lorakit / PEFT (time ratio, below 1: lorakit is faster);
- peak RSS MiB of each side during the steps (VmHWM after a reset once loaded: the model in, its loading out);
- live MiB: lorakit's peak of live tensors over two steps, from 10_memory's `measure_steps` (run after the timed steps);
- predicted MiB: `estimate_memory`'s peak for the same step, and its error against the live peak;
- KiB/token: the growth of lorakit's peak RSS per extra token against the previous row of the same batch (or the same
  sequence length), beside the estimator's growth per token over the same step (its activations and loss tensors).
The interpreter and libraries (a few hundred MiB) are in RSS, not in the estimate: compare the slopes, and the live peak.
Read the ratios: the machine may be shared; `--threads 1` steadies them on a busy one.
"""
import argparse, json, statistics, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))
from malloc import in_process, predicted_mib

def shapes(quick:bool, only:str|None=None)->list:
    "(bs, seq) of each row: seq grows at batch 1, then at batch 2, then batch grows at seq 512."
    if only: return [tuple(int(v) for v in s.lower().split('x')) for s in only.split(',')]
    if quick: return [(1, 256), (1, 512)]
    return ([(1, T) for T in (256, 512, 1024, 2048)] + [(2, T) for T in (256, 512, 1024, 2048)]
            + [(4, 512)])

def run(a)->dict:
    "Every (side, shape) in its own process, `a.rounds` times in turn; the medians by (side, shape)."
    res = {}
    for _ in range(a.rounds):
        for bs, T in shapes(a.quick, a.shapes):
            for kind in a.sides:
                r = in_process(dict(kind=kind, bs=bs, seq=T, steps=a.steps, warmup=a.warmup, threshold=65536,
                                    threads=a.threads, live=kind != 'peft' and not a.no_live))
                d = res.setdefault((kind, bs, T), dict(times=[], rss=[], live=[]))
                d['times'] += r['times']; d['rss'].append(r['rss'])
                if 'live' in r: d['live'].append(r['live'])
    return {k: dict(t=statistics.median(v['times']), rss=statistics.median(v['rss']),
                    live=statistics.median(v['live']) if v['live'] else None) for k, v in res.items()}

def table(a, med:dict)->list:
    "The markdown table's lines, and the rows for a plot."
    print("| bs x seq | lorakit ms | PEFT ms | lorakit / PEFT | lorakit tok/s | PEFT tok/s | lorakit RSS MiB | PEFT RSS MiB "
          "| live MiB | predicted MiB | error % | RSS KiB/token | predicted KiB/token |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows, done = [], {}  # (bs, seq) -> (lorakit's peak RSS, predicted), for the slopes
    for bs, T in shapes(a.quick, a.shapes):
        L, P = med.get(('chunked', bs, T)), med.get(('peft', bs, T))
        pred = predicted_mib(bs, T)
        err = f"{(pred - L['live']) / L['live'] * 100:+.1f}" if L and L['live'] else '–'
        # the row this one grows from: the same batch at the next shorter sequence; batch 4 from batch 2
        shorter = [t for b, t in done if b == bs and t < T]
        base = done.get((2, T)) if bs == 4 else done.get((bs, max(shorter))) if shorter else None
        ntok = 2 * T if bs == 4 else bs * max(shorter) if shorter else 0
        slope = pslope = '–'
        if base and L:
            dtok = bs * T - ntok
            slope, pslope = f"{(L['rss'] - base[0]) * 1024 / dtok:.1f}", f"{(pred - base[1]) * 1024 / dtok:.1f}"
        if L: done[bs, T] = (L['rss'], pred)
        f = lambda d, k, fmt: format(d[k] * (1e3 if k == 't' else 1), fmt) if d else '–'
        tok = lambda d: f"{bs * T / d['t']:.0f}" if d else '–'
        ratio = f"{L['t'] / P['t']:.2f}" if L and P else '–'
        live = f"{L['live']:.0f}" if L and L['live'] else '–'
        print(f"| {bs} x {T} | {f(L, 't', '.0f')} | {f(P, 't', '.0f')} | {ratio} | {tok(L)} | {tok(P)} | {f(L, 'rss', '.0f')} "
              f"| {f(P, 'rss', '.0f')} | {live} | {pred:.0f} | {err} | {slope} | {pslope} |")
        rows.append((bs, T, L, P, pred))
    return rows

def plot(rows, path):
    "Step time and peak RSS against tokens a step, each side; the estimate beside lorakit's live peak."
    import matplotlib; matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
    for name, i, m in (('lorakit', 2, 'o-'), ('PEFT + bnb', 3, 's--')):
        pts = sorted(((bs * T, r[i]) for r in rows for bs, T in [r[:2]] if r[i]), key=lambda p: p[0])  # 1x1024 ties 2x512
        ax1.plot([p[0] for p in pts], [p[1]['t'] for p in pts], m, label=name)
        ax2.plot([p[0] for p in pts], [p[1]['rss'] for p in pts], m, label=f"{name}, peak RSS")
    pts = sorted((bs * T, L['live'], pred) for bs, T, L, P, pred in rows if L and L['live'])
    ax2.plot([p[0] for p in pts], [p[1] for p in pts], 'o:', label='lorakit, live tensors')
    ax2.plot([p[0] for p in pts], [p[2] for p in pts], 'x:', label='estimate_memory')
    ax1.set(xlabel='tokens a step', ylabel='s / step'); ax2.set(xlabel='tokens a step', ylabel='MiB')
    for ax in (ax1, ax2): ax.legend(fontsize=8)
    fig.tight_layout(); tmp = Path(path).with_suffix('.tmp.png'); fig.savefig(tmp, dpi=80); plt.close(fig)
    tmp.replace(path)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--steps', type=int, default=3); p.add_argument('--warmup', type=int, default=1)
    p.add_argument('--rounds', type=int, default=2); p.add_argument('--threads', type=int, default=0)
    p.add_argument('--sides', default='chunked,peft', help="'chunked' (lorakit) and/or 'peft'")
    p.add_argument('--no-live', action='store_true', help="skip the live-tensor measurement (slow at long sequences)")
    p.add_argument('--quick', action='store_true'); p.add_argument('--plot', default=None)
    p.add_argument('--shapes', default=None, help="comma-separated BSxSEQ rows instead of the full grid, e.g. 1x256,4x512")
    a = p.parse_args()
    a.sides = a.sides.split(',')
    if a.quick: a.steps, a.rounds = 2, 1
    print(f"QLoRA step on SmolLM2-135M-Instruct, all-linear r 8, CPU float32, trim_malloc on both sides; "
          f"{a.rounds} processes x {a.steps} timed steps for each cell, in turn; threads: {a.threads or 'torch default'}\n")
    rows = table(a, run(a))
    if a.plot: plot(rows, a.plot)

if __name__ == '__main__': main()
