#!/usr/bin/env python
"""What `trim_malloc` (10_memory) costs and gains: a QLoRA step on SmolLM2-135M with glibc's defaults and with it.

    python bench/malloc.py                       # 2x256 and 4x512, 3 rounds, 4 timed steps a process
    python bench/malloc.py --quick               # 2x256 only, one round, 2 timed steps: a check that the script runs
    python bench/malloc.py --shapes 4x512 --thresholds 65536,1048576   # other thresholds

Each configuration runs in its own process (mallopt is process-wide), the configurations in turn, `--rounds` times.
A process loads the model (lorakit, chunked loss: the job's default; `bench/real.py`'s `build`), calls
`trim_malloc(threshold)` or not, resets its peak resident memory (`/proc/self/clear_refs`), then takes
`--warmup` + `--steps` steps on random tokens. It reports:
- step ms: the median of every timed step of every round; `/ default` is the ratio to glibc's defaults;
- peak RSS MiB: the most the process held during the steps (VmHWM after the reset: the model included, its loading not);
- load peak MiB: ru_maxrss, the most it held at any time, loading included;
- predicted MiB: `estimate_memory`'s peak of live tensors for the same step (float32, chunked loss, all-linear r 8).
Linux only (it reads /proc). Read the ratios: the machine may be shared.
"""
import argparse, json, re, resource, statistics, subprocess, sys, time, warnings
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent))

def size(s):
    "'4x256' -> (4, 256)."
    bs, T = s.lower().split('x')
    return int(bs), int(T)

def vm_hwm_mib()->float:
    "This process's peak resident memory since the last reset, MiB."
    return int(re.search(r'VmHWM:\s+(\d+)', Path('/proc/self/status').read_text()).group(1)) / 1024

def reset_peak_rss(): Path('/proc/self/clear_refs').write_text('5')

def step_run(kind:str, bs:int, seq:int, steps:int, warmup:int, threshold:int=0, r:int=8,
             live:bool=False, threads:int=0)->dict:
    "Load `kind` (bench/real.py's), trim malloc if `threshold`, time the steps; the numbers as a dict."
    import torch
    if threads: torch.set_num_threads(threads)
    from types import SimpleNamespace
    warnings.filterwarnings('ignore')
    from real import build
    from lorakit.core import set_seed
    from lorakit.memory import trim_malloc
    set_seed(0)
    model, loss = build(kind, SimpleNamespace(r=r), torch.device('cpu'), torch.float32)
    trimmed = trim_malloc(threshold) if threshold else False
    x = torch.randint(0, model.config.vocab_size, (bs, seq))
    # transformers shifts `labels` itself; lorakit's losses take the targets already shifted
    y = x if kind == 'peft' else torch.cat([x[:, 1:], torch.full_like(x[:, :1], -100)], 1)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    reset_peak_rss()
    times = []
    for i in range(warmup + steps):
        t = time.perf_counter()
        loss(x, y).backward(); opt.step(); opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t)
    out = dict(kind=kind, threshold=threshold, trimmed=trimmed, times=times[warmup:], rss=vm_hwm_mib(),
               load_peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    if live and kind != 'peft':  # live tensors, op by op: 10's timeline (slow, so after the timed steps)
        from lorakit.memory import measure_steps, ChunkedLMLoss
        out['live'] = measure_steps(model, x, y, steps=2, loss_fn=ChunkedLMLoss()).peak / 2**20
    return out

def predicted_mib(bs:int, seq:int, r:int=8)->float:
    "`estimate_memory`'s peak for lorakit's side: SmolLM2, NF4, float32, chunked loss, all-linear r `r`, no dropout."
    from lorakit.memory import estimate_memory
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.train import TrainConfig
    job = TrainConfig(quant='nf4', r=r, bs=bs, seq_len=seq, dtype='float32', dropout=0., loss='chunked')
    return estimate_memory(job, smollm2_checkpoint()).peak / 2**20

def in_process(args:list)->dict:
    "Run this script's worker in a fresh process; its JSON line."
    out = subprocess.run([sys.executable, __file__, '--one', json.dumps(args)], capture_output=True, text=True)
    if out.returncode: sys.exit(f"{args} failed:\n{out.stderr[-3000:]}")
    r = json.loads([l for l in out.stdout.splitlines() if l.startswith('{')][-1])
    print(f"  {args}: {json.dumps(r)}", file=sys.stderr, flush=True)  # as it goes: a long run shows progress
    return r

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--shapes', default='2x256,4x512'); p.add_argument('--thresholds', default='65536')
    p.add_argument('--steps', type=int, default=4); p.add_argument('--warmup', type=int, default=1)
    p.add_argument('--rounds', type=int, default=3); p.add_argument('--quick', action='store_true')
    p.add_argument('--threads', type=int, default=0, help="torch's threads (default: torch's choice); 1 on a busy machine")
    p.add_argument('--one', default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one: return print(json.dumps(step_run(**json.loads(a.one))))
    if a.quick: a.shapes, a.steps, a.rounds = '2x256', 2, 1
    ths = [0] + [int(t) for t in a.thresholds.split(',')]
    name = lambda t: 'glibc defaults' if not t else f"trim_malloc({t})"
    print(f"QLoRA step on SmolLM2-135M-Instruct (lorakit, chunked loss), all-linear r 8, CPU float32; "
          f"{a.rounds} processes x {a.steps} timed steps for each row, in turn; threads: {a.threads or 'torch default'}\n")
    print("| bs x seq | malloc | step ms | / default | peak RSS MiB | / default | load peak MiB | predicted MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for bs, seq in map(size, a.shapes.split(',')):
        res = {t: dict(times=[], rss=[], load=[]) for t in ths}
        for _ in range(a.rounds):
            for t in ths:
                r = in_process(dict(kind='chunked', bs=bs, seq=seq, steps=a.steps, warmup=a.warmup, threshold=t, threads=a.threads))
                res[t]['times'] += r['times']; res[t]['rss'].append(r['rss']); res[t]['load'].append(r['load_peak'])
        med = {t: (statistics.median(v['times']), statistics.median(v['rss']), statistics.median(v['load'])) for t, v in res.items()}
        pred = predicted_mib(bs, seq)
        for t in ths:
            s, m, l = med[t]
            print(f"| {bs} x {seq} | {name(t)} | {s*1e3:.0f} | {s/med[0][0]:.2f} | {m:.0f} | {m/med[0][1]:.2f} | {l:.0f} | {pred:.0f} |")

if __name__ == '__main__': main()
