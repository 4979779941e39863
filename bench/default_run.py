#!/usr/bin/env python
"""The job's default run, recorded: what `lorakit-train` does with no arguments, once, for nbs/07_train.ipynb to plot.

    python bench/default_run.py            # run it and print the job's summary lines
    python bench/default_run.py --write    # ... and write nbs/baselines/default_run.json (commit it)

The run is `finetune(TrainConfig(out=...))`: every default (the shipped base in NF4, Python's reference docs, 250 steps
of batches of 16 x 128, validation over every held-out row before training and five times during it), as
`lorakit-train` runs it, in a temporary directory. The file keeps the config, the summary lines the job printed, and
every record of the run's metrics.jsonl: step 0's validation loss, then each step's loss, learning rate and gradient
norm. Too slow for a notebook test (3 to 5 minutes on a 2-core CPU), so the notebook plots this recording, and checks
that it is still a run of today's default job.
"""
import argparse, datetime, json, platform, sys, tempfile, time
from dataclasses import asdict
from pathlib import Path
import torch
import lorakit
from lorakit.core import atomic_path
from lorakit.train import TrainConfig
from lorakit.finetune import finetune

OUT = Path(__file__).resolve().parent.parent/'nbs'/'baselines'/'default_run.json'

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--write', action='store_true', help=f"write {OUT.relative_to(OUT.parent.parent.parent)}")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cfg, lines, t0 = TrainConfig(out=str(Path(d)/'lorakit-run')), [], time.time()
        res = finetune(cfg, log=lambda s: (lines.append(s), print(s, flush=True)))
        took = time.time() - t0
        metrics = [json.loads(l) for l in (Path(cfg.out)/'metrics.jsonl').read_text().splitlines()]
    said = [l.replace(str(Path(d)), '.') for s in lines for l in s.splitlines()]
    rec = dict(about="The metrics of the job's default run, `lorakit-train` with no arguments; plotted by nbs/07_train.ipynb",
               command='lorakit-train', made_by='python bench/default_run.py --write', config=asdict(cfg) | {'out': 'lorakit-run'},
               said=said, before=res['before'], after=res['after'], metrics=metrics,
               torch=torch.__version__, lorakit=lorakit.__version__,
               machine=f"{platform.machine()}, {torch.get_num_threads()} threads, {torch.backends.cpu.get_cpu_capability()}",
               date=datetime.date.today().isoformat())
    print(f"{len(metrics)} records, {took:.0f} s", file=sys.stderr)  # the time is this machine's: not kept
    if a.write:  # a record a line
        head = json.dumps({k: v for k, v in rec.items() if k != 'metrics'}, indent=1)[:-2]
        text = head + ',\n "metrics": [\n' + ',\n'.join('  ' + json.dumps(m) for m in metrics) + '\n ]\n}\n'
        assert json.loads(text) == json.loads(json.dumps(rec))
        with atomic_path(OUT) as t: t.write_text(text)
        print(f"wrote {OUT}", file=sys.stderr)

if __name__ == '__main__': main()
