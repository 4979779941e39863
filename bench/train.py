#!/usr/bin/env python
"""A QLoRA (and LoRA) training step, lorakit against PEFT + bitsandbytes + transformers, on the same checkpoint.

    python bench/train.py                 # the shipped base, batch 16 x 128, r 8, all-linear, CPU
    python bench/train.py --steps 30 --bs 8

Each configuration runs in its own process, so that its peak resident memory (ru_maxrss) is its own;
the four run in turn, `--rounds` times, and the table reports the median step time over all timed
steps and the largest peak RSS. Both sides compute the same loss (cross-entropy on the logits) with
AdamW on the LoRA weights. Read the ratios, not the milliseconds: this machine is shared and noisy.
Needs the dev extra (peft, transformers).
"""
import argparse, json, resource, statistics, subprocess, sys, time, warnings

def one(kind, a):
    "Time `a.steps` training steps of configuration `kind`; print a JSON line with step times and peak RSS."
    import torch, torch.nn as nn, torch.nn.functional as F
    warnings.filterwarnings('ignore')
    from lorakit.core import set_seed
    from lorakit.pretrain import base_path
    set_seed(0)
    x = torch.randint(0, 258, (a.bs, a.seq)); y = torch.randint(0, 258, (a.bs, a.seq))
    if kind.startswith('lorakit'):
        from lorakit.model import Llama
        from lorakit.qlora import QuantSpec
        from lorakit.inject import add_lora
        model = add_lora(Llama.from_pretrained(base_path(), dtype='float32', device='cpu', quant=QuantSpec() if kind.endswith('qlora') else None), r=a.r, alpha=2*a.r)
        logits = lambda: model(x)
    else:
        from transformers import LlamaForCausalLM
        from transformers.utils import logging as hf_logging
        from peft import LoraConfig, get_peft_model
        hf_logging.set_verbosity_error()
        model = LlamaForCausalLM.from_pretrained(base_path(), dtype=torch.float32)
        if kind.endswith('qlora'):
            import bitsandbytes as bnb
            from lorakit.inject import find_targets, set_module
            for n in find_targets(model):
                lin = model.get_submodule(n)
                l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=torch.float32, quant_type='nf4', compress_statistics=True)
                l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4', compress_statistics=True)
                set_module(model, n, l4.to('cpu'))
        model = get_peft_model(model, LoraConfig(r=a.r, lora_alpha=2*a.r, target_modules='all-linear', lora_dropout=0.), autocast_adapter_dtype=False)
        logits = lambda: model(input_ids=x).logits
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    times = []
    for i in range(a.warmup + a.steps):
        t = time.perf_counter()
        F.cross_entropy(logits().flatten(0, 1).float(), y.flatten()).backward(); opt.step(); opt.zero_grad(set_to_none=True)
        if i >= a.warmup: times.append(time.perf_counter() - t)
    print(json.dumps(dict(kind=kind, times=times, rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--bs', type=int, default=16); p.add_argument('--seq', type=int, default=128)
    p.add_argument('--r', type=int, default=8); p.add_argument('--steps', type=int, default=15)
    p.add_argument('--warmup', type=int, default=3); p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--one', default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.one: return one(a.one, a)
    kinds = ['lorakit-qlora', 'peft-qlora', 'lorakit-lora', 'peft-lora']
    res = {k: dict(times=[], rss=0.) for k in kinds}
    for _ in range(a.rounds):
        for k in kinds:
            out = subprocess.run([sys.executable, __file__, '--one', k] + sys.argv[1:], capture_output=True, text=True, check=True).stdout
            r = json.loads([l for l in out.splitlines() if l.startswith('{')][-1])
            res[k]['times'] += r['times']; res[k]['rss'] = max(res[k]['rss'], r['rss_mb'])
    med = {k: statistics.median(v['times']) for k, v in res.items()}
    print(f"training step on lorakit's shipped base (2.97M params), batch {a.bs}x{a.seq}, r {a.r}, all-linear, CPU fp32; "
          f"{a.rounds} processes x {a.steps} timed steps per configuration\n")
    print("| configuration | lorakit ms | PEFT ms | lorakit / PEFT | lorakit peak RSS MB | PEFT peak RSS MB |\n|---|---:|---:|---:|---:|---:|")
    for name, o, r in (('QLoRA (NF4 base)', 'lorakit-qlora', 'peft-qlora'), ('LoRA (fp32 base)', 'lorakit-lora', 'peft-lora')):
        print(f"| {name} | {med[o]*1e3:.1f} | {med[r]*1e3:.1f} | {med[o]/med[r]:.2f} | {res[o]['rss']:.0f} | {res[r]['rss']:.0f} |")

if __name__ == '__main__': main()
