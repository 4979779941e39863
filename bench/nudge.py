#!/usr/bin/env python
"""A real nudge session, and whether the proxy's verdict holds on the full job.

    python bench/nudge.py              # the session on the shipped base's proxy, then its start and proposed lr on the full default job
    python bench/nudge.py --smollm2    # ... and a session on SmolLM2-135M-Instruct's proxy
    python bench/nudge.py --quick      # a 12-step proxy, no full job: a check that the script runs (about a minute)

1. The proxy: `JobProxy(proxy_config())`, the default job (the shipped base in NF4, Python's docs) shrunk to 20 steps of
   8 x 32 tokens on 512 rows, validated on 64 held-out rows, 3 seeds per config. The session starts from lr 1e-4 (20 x
   below the default job's 2e-3) and runs `nudge('lr', step=10)`, then `nudge('lr', step=3)` from where that ended.
2. The full job: `finetune(TrainConfig(lr=...))`, every other setting the default (250 steps of 16 x 128), once at
   the start lr, once at the proposed lr, and once at the default 2e-3 for reference. Its validation loss is 98_finetune's:
   10 batches of the job's own held-out rows, which are not the proxy's.
3. Timing: the median seconds of a proxy run against one full job, on this machine, as a ratio.

Takes about 10 minutes on the 2-core CPU (each full job about 2.5), plus about 4 with --smollm2.
"""
import argparse, statistics, sys, tempfile, time
from dataclasses import replace
from pathlib import Path
import torch
from lorakit.train import TrainConfig
from lorakit.finetune import finetune
from lorakit.nudge import Ratchet, proxy_config, nudge, compare
from lorakit.finetune import JobProxy

def session(task, seeds, steps, start_lr:float, max_probes:int=6):
    "Coarse (x10) then fine (x3) nudges of lr from `start_lr`; returns the ratchet and the two results."
    rt = Ratchet(Path(tempfile.mkdtemp())/'ratchet.json', task, seeds=seeds, log=lambda m: print('  ' + m, flush=True))
    coarse = nudge('lr', rt, step=10, max_probes=max_probes)
    fine = nudge('lr', rt, cfg=coarse.best, step=3, max_probes=max_probes)
    return rt, coarse, fine

def run_times(rt)->list[float]: return [r['seconds'] for rec in rt.store['records'].values() for r in rec['runs']]

def full_job(lr:float)->tuple[dict, float]:
    t = time.perf_counter()
    res = finetune(TrainConfig(lr=lr, device='cpu'), log=lambda *a, **k: None, progress=False)
    return res['after'], time.perf_counter() - t

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--quick', action='store_true'); p.add_argument('--smollm2', action='store_true')
    a = p.parse_args()
    torch.set_num_threads(torch.get_num_threads())
    steps = 12 if a.quick else 20
    print(f"## the shipped base's proxy: {steps} steps of 8 x 32, 512 rows, 3 seeds, from lr 1e-4\n", flush=True)
    task = JobProxy(replace(proxy_config(steps=steps), lr=1e-4))
    rt, coarse, fine = session(task, (0, 1, 2), steps, 1e-4)
    print(coarse.table(), '\n'); print(fine.table(), '\n')
    start, best = coarse.start, fine.best
    v = compare(rt.record(best), rt.record(start), rt.level)
    print(f"proposed lr {best.lr:.4g} against the start {start.lr:.4g} on the proxy: {v}\n")
    pt = run_times(rt)
    print(f"proxy: {len(pt)} runs, median {statistics.median(pt):.2f} s a run\n", flush=True)

    if not a.quick:
        print("## the full default job (250 steps of 16 x 128) at each lr\n", flush=True)
        rows = []
        for name, lr in (('start', start.lr), ('proposed', best.lr), ('default job', 2e-3)):
            after, sec = full_job(lr); rows.append((name, lr, after, sec))
            print(f"  {name} lr {lr:.4g}: valid {after['valid']:.4f}, shakespeare {after['shakespeare']:.4f}, {sec:.0f} s", flush=True)
        proxy = {name: rt.record(replace(start, lr=lr)) for name, lr, _, _ in rows}
        print("\n| run | lr | proxy valid loss (3 seeds) | full job valid loss | full job Shakespeare loss |\n|---|---:|---:|---:|---:|")
        for name, lr, after, _ in rows:
            print(f"| {name} | {lr:.4g} | {proxy[name].mean:.4f} ± {proxy[name].std:.4f} | {after['valid']:.4f} | {after['shakespeare']:.4f} |")
        held = (rows[1][2]['valid'] < rows[0][2]['valid']) == (v.verdict == 'better')
        print(f"\nthe proxy said the proposed lr is {v.verdict} than the start; on the full job it is "
              f"{'better' if rows[1][2]['valid'] < rows[0][2]['valid'] else 'not better'} ({rows[1][2]['valid'] - rows[0][2]['valid']:+.4f}): "
              f"the verdict {'held' if held else 'did not hold'}")
        full = statistics.median(r[3] for r in rows)
        print(f"\n| | median s | / full job |\n|---|---:|---:|\n| proxy run | {statistics.median(pt):.2f} | {statistics.median(pt)/full:.4f} |"
              f"\n| full default job | {full:.1f} | 1 |", flush=True)

    if a.smollm2 or a.quick:
        from lorakit.gguf import smollm2_checkpoint
        sst = 3 if a.quick else 8
        print(f"\n## SmolLM2-135M-Instruct's proxy: {sst} steps of 4 x 32, 128 rows, 2 seeds, from lr 1e-4\n", flush=True)
        cfg = replace(proxy_config(TrainConfig(model=str(smollm2_checkpoint())), steps=sst, bs=4, seq_len=32), lr=1e-4)
        t = time.perf_counter(); st = JobProxy(cfg, train_rows=128, valid_rows=32); load = time.perf_counter() - t
        srt = Ratchet(Path(tempfile.mkdtemp())/'ratchet.json', st, seeds=(0, 1), log=lambda m: print('  ' + m, flush=True))
        res = nudge('lr', srt, step=10, max_probes=1 if a.quick else 4, interpolate=not a.quick)
        print(res.table(), '\n')
        print(f"proposed lr {res.best.lr:.4g}: {res.verdict}")
        spt = run_times(srt)
        print(f"SmolLM2 proxy: loaded in {load:.1f} s; {len(spt)} runs, median {statistics.median(spt):.2f} s a run")

if __name__ == '__main__': main()
