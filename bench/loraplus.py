#!/usr/bin/env python
"""LoRA+ in lorakit against PEFT's create_loraplus_optimizer: the same Llama, groups, and steps.

    python bench/loraplus.py                      # CPU, a small Llama, 1 thread, ratios 1 and 16
    python bench/loraplus.py --ratios 1 4 16 64 --threads 2

For each ratio: the optimizer step alone (AdamW over the LoRA+ groups, gradients fixed) and a whole
train step (forward, backward, AdamW), lorakit's `make_optimizer(loraplus_groups(...))` (fused
AdamW) against PEFT's `create_loraplus_optimizer(model, torch.optim.AdamW, ...)` (torch's default
AdamW), run in alternation, medians over `--reps`. Before timing it checks that both make the same
groups and that three steps leave the same LoRA weights. Read the ratio column, not the
milliseconds: the machine is shared. Needs the dev extra (peft, transformers).
"""
import copy, logging, re
import torch, torch.nn as nn
logging.getLogger('bitsandbytes.backends.cpu.ops').addFilter(
    lambda r: 'kernels-community' not in r.getMessage())
from peft import LoraConfig, get_peft_model
from peft.optimizers import create_loraplus_optimizer
from lorakit.core import get_device, get_dtype
from lorakit.inject import add_lora, lora_parameters, lora_modules
from lorakit.train import loraplus_groups, make_optimizer
from _common import bench, table, train_step, llama_args, small_llama

def pair(base, r):
    "The same Llama with the same nonzero LoRA weights: lorakit's `add_lora` and PEFT's."
    ours = add_lora(copy.deepcopy(base), 'all-linear', r=r, alpha=2*r, dropout=0.)
    for p in lora_parameters(ours): nn.init.normal_(p, std=0.02)
    peft = get_peft_model(copy.deepcopy(base), LoraConfig(r=r, lora_alpha=2*r, lora_dropout=0.,
                          target_modules='all-linear'), autocast_adapter_dtype=False)
    for n, m in lora_modules(ours).items():
        pm = peft.base_model.model.get_submodule(n)
        with torch.no_grad():
            pm.lora_A['default'].weight.copy_(m.A)
            pm.lora_B['default'].weight.copy_(m.B)
    return ours, peft

def optimizers(ours, peft, lr, k, wd):
    o = make_optimizer(loraplus_groups(ours, lr, k, wd), 'adamw', lr, wd)
    p = create_loraplus_optimizer(peft, torch.optim.AdamW, lr=lr, loraplus_lr_ratio=k,
                                  loraplus_weight_decay=wd)
    return o, p

def groups(opt):
    return [(len(g['params']), g['lr'], g['weight_decay']) for g in opt.param_groups if g['params']]

def opt_step(model, opt):
    "The optimizer step alone: every LoRA weight given a fixed gradient first."
    ps = [p for p in model.parameters() if p.requires_grad]
    g = [torch.full_like(p, 1e-3) for p in ps]
    def step():
        for p, gi in zip(ps, g): p.grad = gi
        opt.step()
    return step

def main():
    import argparse, sys
    p = argparse.ArgumentParser()
    p.add_argument('--ratios', type=float, nargs='+', default=[1, 16])
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--lr', type=float, default=1e-4)
    p.add_argument('--wd', type=float, default=0.01)
    own, sys.argv[1:] = p.parse_known_args()
    a = llama_args(__doc__)
    torch.set_num_threads(own.threads)
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    base, ids = small_llama(a, dev, dt)
    rows, checks = [], []
    for k in own.ratios:
        ours, peft = pair(base, a.r)
        o, q = optimizers(ours, peft, own.lr, k, own.wd)
        assert groups(o) == groups(q), (groups(o), groups(q))
        for _ in range(3):
            train_step(ours.train(), ids, o)()
            train_step(peft.train(), ids, q)()
        gap = max((getattr(m, ab) - getattr(peft.base_model.model.get_submodule(n),
                   f'lora_{ab}')['default'].weight).abs().max().item()
                  for n, m in lora_modules(ours).items() for ab in 'AB')
        checks.append(f"ratio {k:g}: groups {groups(o)}; max |LoRA weight gap| after 3 steps "
                      f"{gap:.1e}")
        rows += bench([(f'ratio {k:g}: optimizer step', opt_step(ours, o), opt_step(peft, q)),
                       (f'ratio {k:g}: train step', train_step(ours.train(), ids, o),
                        train_step(peft.train(), ids, q))], a.reps, dev)
    print(f"Llama hidden={a.hidden} layers={a.layers} batch={a.bs}x{a.seq} r={a.r} all-linear, "
          f"{dev.type} {a.dtype}, {torch.get_num_threads()} thread(s), {a.reps} reps, "
          f"torch {torch.__version__}; AdamW lr {own.lr:g}, weight decay {own.wd:g}")
    print('\n'.join(checks) + '\n')
    print(table(rows, 'PEFT'))

if __name__ == '__main__': main()
