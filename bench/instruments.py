#!/usr/bin/env python
"""What each instrument of lorakit.instrument costs, as a ratio to the bare training step of the default job.

    python bench/instruments.py                  # the default job: shipped base in NF4, all-linear r 8, batch 16 x 128, CPU
    python bench/instruments.py --smollm2 --bs 2 # the same on SmolLM2-135M-Instruct (slower: a few seconds a step on CPU)

Every case is the same `train` loop on the same model and data, with one instrument (or
`torch.autograd.detect_anomaly`, the reference for the NaN tracer) attached. The cases run in
turn, `--rounds` times, `--steps` steps each; a step's time is the gap between two `end_step`
calls, the first and last step of each run left out (warm-up, and the final validation). The table
gives the median step time and its ratio to the bare step's. Read the ratios, not the
milliseconds: this machine is shared and noisy.
"""
import argparse, contextlib, statistics, time, warnings

def cases(model):
    "(name, callbacks factory, context factory) for each configuration timed."
    import torch
    from lorakit.instrument import GradNorms, SpikeGuard, ActivationStats, NaNTracer
    none = contextlib.nullcontext
    return [('bare step', lambda: [], none),
            ('grad norms (every step)', lambda: [GradNorms(model)], none),
            ('spike guard', lambda: [SpikeGuard(log=lambda m: None)], none),
            ('grad norms + spike guard', lambda: [GradNorms(model), SpikeGuard(log=lambda m: None)], none),
            ('activation stats (every step)', lambda: [ActivationStats(model, every=1)], none),
            ('activation stats (every 10th step)', lambda: [ActivationStats(model, every=10)], none),
            ('NaN tracer', lambda: [NaNTracer(model, raise_on_nan=True)], none),
            ('torch.autograd.detect_anomaly', lambda: [], torch.autograd.detect_anomaly)]

def step_times(model, data, cfg, cbs, ctx):
    "The times of the steps of one short `train` run, without its first and last."
    from lorakit.run import train
    from lorakit.train import Callback
    ts = []
    class Clock(Callback):
        def end_step(self, s): ts.append(time.perf_counter())
    with ctx(): train(model, data, cfg, progress=False, callbacks=[*cbs, Clock()])
    return [b - a for a, b in zip(ts, ts[1:])][:-1]

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--smollm2', action='store_true', help='SmolLM2-135M-Instruct instead of the shipped base')
    p.add_argument('--bs', type=int, default=16); p.add_argument('--seq', type=int, default=128)
    p.add_argument('--steps', type=int, default=6, help='steps per run; the first and last are not timed')
    p.add_argument('--rounds', type=int, default=3)
    a = p.parse_args()
    warnings.filterwarnings('ignore')
    import torch
    from lorakit.train import TrainConfig
    from lorakit.finetune import load_job
    from lorakit.gguf import smollm2_checkpoint
    cfg = TrainConfig(model=str(smollm2_checkpoint()) if a.smollm2 else None, bs=a.bs, seq_len=a.seq, steps=a.steps, eval_every=10**6, eval_batches=1, samples=0)
    job = load_job(cfg)
    model, data = job.model, job.data
    print(f"# {'SmolLM2-135M-Instruct' if a.smollm2 else 'shipped base'}, NF4, all-linear r {cfg.r}, batch {a.bs} x {a.seq}, "
          f"{torch.get_num_threads()} threads, torch {torch.__version__}")
    cs, times = cases(model), {}
    for _ in range(a.rounds):
        for name, cbs, ctx in cs: times.setdefault(name, []).extend(step_times(model, data, cfg, cbs(), ctx))
    bare = statistics.median(times['bare step'])
    print(f"\n| case | median step ms | / bare step |\n|---|---:|---:|")
    for name, _, _ in cs:
        t = statistics.median(times[name])
        print(f"| {name} | {t*1e3:.0f} | {t/bare:.3f} |")
    print(f"\n{len(times['bare step'])} timed steps a case, over {a.rounds} rounds")

if __name__ == '__main__': main()
