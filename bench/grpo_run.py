#!/usr/bin/env python
"""`lorakit-train --reward answer` on SmolLM2-135M-Instruct (QLoRA) learning 2-digit addition: held-out greedy accuracy before and after, the reward curve, the time split.

    python bench/grpo_run.py --out /tmp/grpo                  # the prompts, the run, the report
    python bench/grpo_run.py --out /tmp/grpo --steps 40 --write  # and record it for nbs/15_grpo.ipynb

The task is made here from Python itself: every a + b with a, b in 0..50 (2,601 problems), as a few-shot prompt
in plain text ("3 + 4 = 7\\n12 + 25 = 37\\na + b ="), one line of OUT/addition.jsonl each: {"prompt", "answer"}.
The job holds out a tenth of the lines by its seeded split and never samples them; its validation answers
`--eval-batches` x `--bs` of them greedily and reports the mean reward, here the accuracy: `--reward answer` is
1 when the completion's first number is the sum. SmolLM2 gets about a third of them right before training, so
groups of 8 samples often disagree and the advantages have something to follow. Each step samples G=8
completions of 4 prompts (8 tokens at most, temperature 1), scores them and takes one optimizer step on the 32
completions in 4 micro-batches of 8 (`dapo`, beta 0). The script prints what the command printed, the held-out
accuracy at each validation, the run's wall time and the part of it spent sampling (the metrics' `sampling_s`).
"""
import argparse, datetime, json, platform, random, subprocess, sys, time
from pathlib import Path
import torch

RECORD = Path(__file__).resolve().parent.parent/'nbs'/'baselines'/'grpo_run.json'
SHOTS = "3 + 4 = 7\n12 + 25 = 37\n"

def addition(hi:int=50)->list[dict]:
    "Every a + b with a, b in 0..hi, as rows {'prompt', 'answer'}, in a seeded order."
    rows = [dict(prompt=f"{SHOTS}{a} + {b} =", answer=a + b) for a in range(hi + 1) for b in range(hi + 1)]
    random.Random(0).shuffle(rows)
    return rows

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True, help="a new or empty directory: addition.jsonl and run/ go there")
    ap.add_argument('--steps', type=int, default=40)
    ap.add_argument('--lr', type=float, default=1e-4)
    ap.add_argument('--dtype', default='auto')
    ap.add_argument('--write', action='store_true', help=f"record the run in nbs/baselines/{RECORD.name}")
    a = ap.parse_args()
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.run import read_metrics
    ck, out = smollm2_checkpoint(), Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    data = out/'addition.jsonl'
    data.write_text(''.join(json.dumps(r) + '\n' for r in addition()))
    cmd = ['lorakit-train', '--model', str(ck), '--data', str(data), '--reward', 'answer', '--out', str(out/'run'),
           '--steps', str(a.steps), '--lr', str(a.lr), '--bs', '8', '--grad-accum', '4', '--num-generations', '8',
           '--max-completion-length', '8', '--dropout', '0', '--warmup', str(max(1, a.steps // 10)),
           '--eval-batches', '12', '--eval-every', str(max(1, a.steps // 4)), '--dtype', a.dtype, '--overwrite']
    print('$', ' '.join(cmd), flush=True)
    t = time.perf_counter()
    said = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    wall = time.perf_counter() - t
    print(said, end='', flush=True)
    ms = read_metrics(out/'run'/'metrics.jsonl')
    sampling = sum(m.get('sampling_s', 0) for m in ms)
    train_s = sum(1 for m in ms if m['step'] > 0)
    for m in ms:
        if 'valid_reward' in m: print(f"step {m['step']:3d}: held-out greedy accuracy {m['valid_reward']:.3f}")
    print(f"{train_s} steps; the command took {wall:.0f} s, of which sampling {sampling:.0f} s")
    if a.write: write_record(a, cmd, said, out/'run', ms, wall, sampling)

def write_record(a, cmd:list, said:str, run:Path, metrics:list, wall:float, sampling:float):
    "The run as 15_grpo shows it: what the command printed, its metrics a record a line, its samples."
    import lorakit
    from lorakit.core import atomic_path
    here = lambda l: l.replace(str(run.parent), 'OUT').replace(str(Path.home()), '~')
    rnd = lambda m: {k: round(v, 6) if isinstance(v, float) else v for k, v in m.items()}
    rec = dict(about="GRPO with lorakit-train --reward answer on SmolLM2-135M-Instruct (QLoRA), 2-digit addition, "
                     "as bench/grpo_run.py makes it; plotted by nbs/15_grpo.ipynb",
               made_by=f'python bench/grpo_run.py --out DIR --steps {a.steps} --write',
               command=here(' '.join(cmd)), said=[here(l) for l in said.splitlines()],
               samples=(run/'samples.txt').read_text(), wall_s=round(wall), sampling_s=round(sampling),
               torch=torch.__version__, lorakit=lorakit.__version__,
               machine=f"{platform.machine()}, {torch.get_num_threads()} threads, "
                       f"{torch.backends.cpu.get_cpu_capability()}",
               date=datetime.date.today().isoformat())
    head = json.dumps(rec, indent=1)[:-2]
    text = head + ',\n "metrics": [\n' + ',\n'.join('  ' + json.dumps(rnd(m)) for m in metrics) + '\n ]\n}\n'
    with atomic_path(RECORD) as t: t.write_text(text)
    print(f"wrote {RECORD}", file=sys.stderr)

if __name__ == '__main__': main()
