#!/usr/bin/env python
"""The loss baseline of the default fine-tune: its first N steps for K seeds, and the tolerance that nbs/98_finetune.ipynb checks in CI.

    python bench/loss_baseline.py              # the table: per step, seed 0's loss, the mean and std over seeds, the tolerance
    python bench/loss_baseline.py --write      # ... and write nbs/baselines/default_job.json (commit it)
    python bench/loss_baseline.py --rounding   # rerun seed 0 as other CPUs would; compare with the stored curve

The job is `TrainConfig(device='cpu')`: every default (the shipped base in NF4, Python's docs, batches of 16 x 128, the
250-step schedule with its 20 warm-up steps) on CPU in float32, as CI runs it. A callback stops it after N steps, so those
steps get the learning rates of the real schedule. Only the seed changes between runs, and it changes everything random:
the data split and order, LoRA's A, the dropout masks. About K x (0.5 s x N + 1 s) on a 2-core CPU.
"""
import argparse, datetime, json, os, platform, subprocess, sys
from dataclasses import asdict
from pathlib import Path
import torch
import lorakit
from lorakit.core import atomic_path
from lorakit.train import TrainConfig, Callback
from lorakit.finetune import first_steps

OUT = Path(__file__).resolve().parent.parent/'nbs'/'baselines'/'default_job.json'
RULE = ("tolerance[t] = k x the seed std at step t, its variance pooled over the `window` steps centred on t "
        "(fewer at the ends), with k = 1: a move larger than one seed std is more than seed noise")
# Why pooled: from K seeds one step's std has K-1 degrees of freedom (about 27% relative error at K=8, and the smallest of
# 20 such estimates is typically half the truth), so a per-step tolerance would be too tight at some step by chance. Pooled
# over 5 steps it has 5(K-1) (about 12% at K=8), and still follows the noise as it falls over the warm-up (0.45 -> 0.2 nats),
# which one std pooled over all N steps would not. Why k = 1: the CI check draws nothing at random (seed 0 reruns exactly),
# so there is no false alarm to guard against, only float rounding, about 1e-5 of a tolerance (see --rounding).

def seed_stats(curves:torch.Tensor, window:int=5, k:float=1.)->dict:
    "Per-step mean and std over the seeds (rows) of `curves`, and the tolerance of `RULE`."
    var = curves.var(0); h = window//2  # var with Bessel's correction: K-1 degrees of freedom
    pooled = torch.stack([var[max(0, t-h):t+h+1].mean() for t in range(len(var))])
    return dict(mean=curves.mean(0), std=var.sqrt(), tolerance=k*pooled.sqrt())

def run(seeds:list[int], n:int)->tuple[torch.Tensor, list[float]]:
    "The first `n` losses of the default job for each seed, and the learning rates of those steps."
    curves, lrs = [], None
    for s in seeds:
        hist = first_steps(TrainConfig(device='cpu', seed=s), n)
        curves.append([h['loss'] for h in hist]); lrs = [h['lr'] for h in hist]
        print(f"seed {s}: {' '.join(f'{l:.3f}' for l in curves[-1])}", file=sys.stderr, flush=True)
    return torch.tensor(curves, dtype=torch.float64), lrs

def table(curves, lrs, st)->str:
    out = ["| step | lr | seed 0 | mean | std | tolerance |", "|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {t+1} | {lrs[t]:.2e} | {curves[0, t]:.3f} | {st['mean'][t]:.3f} | {st['std'][t]:.3f} | {st['tolerance'][t]:.3f} |" for t in range(curves.shape[1])]
    return '\n'.join(out)

def write(curves, lrs, st, a):
    r6 = lambda xs: [round(float(x), 6) for x in xs]
    b = dict(about="The first `steps` losses of the default job, TrainConfig(device='cpu'), for each seed; checked by nbs/98_finetune.ipynb",
             steps=a.steps, seeds=list(range(a.seeds)), config=asdict(TrainConfig(device='cpu')), lr=[round(x, 8) for x in lrs],
             seed0=[float(x) for x in curves[0]], tolerance=r6(st['tolerance']), rule=RULE, window=a.window, k=a.k,
             mean=r6(st['mean']), std=r6(st['std']), curves=[r6(c) for c in curves],
             torch=torch.__version__, lorakit=lorakit.__version__, machine=f"{platform.machine()}, {torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}",
             date=datetime.date.today().isoformat(), made_by="python bench/loss_baseline.py --write")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(OUT) as t: t.write_text(json.dumps(b, indent=1) + '\n')
    print(f"\nwrote {OUT}")

class _Jitter(Callback):
    "Before the first step, move every trainable weight by one float32 ulp, up or down: the rounding of another machine's init."
    def begin_fit(self, s):
        g = torch.Generator().manual_seed(1)  # its own generator: the job's random stream stays as it was
        with torch.no_grad():
            for p in s.params: p.mul_(1 + 2**-23 * torch.randn(p.shape, generator=g).sign())

# Other kernels, other summation orders. On this AVX2 machine 1 thread and MKL limited to SSE4.2 give the same bits;
# ATen's unvectorized kernels (norms, softmax, the loss) do not, and neither does a 1-ulp change of every LoRA weight.
VARIANTS = {'as stored': ({}, []), '1 thread': (dict(OMP_NUM_THREADS='1'), []),
            'ATEN_CPU_CAPABILITY=default': (dict(ATEN_CPU_CAPABILITY='default'), []),
            'LoRA weights off by 1 ulp': ({}, ['--jitter']),
            'all three': (dict(OMP_NUM_THREADS='1', ATEN_CPU_CAPABILITY='default'), ['--jitter'])}

def rounding():
    "Rerun seed 0 in a fresh process per variant (other kernels, other summation orders); print its distance from the stored curve."
    b = json.loads(OUT.read_text()); ref, tol = torch.tensor(b['seed0'], dtype=torch.float64), torch.tensor(b['tolerance'], dtype=torch.float64)
    print(f"seed 0, {b['steps']} steps, against {OUT.name} ({b['machine']}, torch {b['torch']})\n")
    print("| variant | max abs diff (nats) | max diff / tolerance |\n|---|---:|---:|")
    for name, (env, args) in VARIANTS.items():
        out = subprocess.run([sys.executable, __file__, '--one', '--steps', str(b['steps'])] + args, env=os.environ | env, capture_output=True, text=True, check=True).stdout
        d = (torch.tensor(json.loads(out.splitlines()[-1]), dtype=torch.float64) - ref).abs()
        print(f"| {name} | {d.max():.1e} | {(d/tol).max():.1e} |")

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--steps', type=int, default=20, help="N: the steps of the default job to run (CI runs them all: ~0.5 s each)")
    p.add_argument('--seeds', type=int, default=8, help="K: seeds 0..K-1")
    p.add_argument('--window', type=int, default=5, help="steps whose seed variance is pooled into each step's tolerance")
    p.add_argument('--k', type=float, default=1., help="the tolerance in seed stds")
    p.add_argument('--write', action='store_true', help=f"write {OUT.relative_to(OUT.parent.parent.parent)}")
    p.add_argument('--rounding', action='store_true', help="rerun seed 0 under other kernels, against the stored curve")
    p.add_argument('--one', action='store_true', help=argparse.SUPPRESS)
    p.add_argument('--jitter', action='store_true', help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one: return print(json.dumps([h['loss'] for h in first_steps(TrainConfig(device='cpu'), a.steps, [_Jitter()] if a.jitter else [])]))
    if a.rounding: return rounding()
    curves, lrs = run(range(a.seeds), a.steps)
    st = seed_stats(curves, a.window, a.k)
    print(f"the default job's first {a.steps} steps, {a.seeds} seeds; tolerance: {RULE}\n")
    print(table(curves, lrs, st))
    print(f"\nseed std pooled over all steps {st['std'].pow(2).mean().sqrt():.3f}; tolerance from {st['tolerance'].min():.3f} to {st['tolerance'].max():.3f}")
    if a.write: write(curves, lrs, st, a)

if __name__ == '__main__': main()
