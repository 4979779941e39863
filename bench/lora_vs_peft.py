#!/usr/bin/env python
"""lorakit's LoRA against PEFT's, side by side in one run: the same Llama, the same adapters, the same steps.

    python bench/lora_vs_peft.py                 # CPU, a small Llama
    python bench/lora_vs_peft.py --device cuda --dtype bf16 --hidden 1024 --layers 8

Each case runs lorakit and PEFT in alternation, `--reps` times after a warm-up, and reports medians.
The machine is shared and noisy: read the ratio column, not the milliseconds.
Needs the dev extra (peft, transformers).
"""
import copy
import torch, torch.nn as nn
from peft import LoraConfig, get_peft_model
from lorakit.core import get_device, get_dtype
from lorakit.inject import add_lora, lora_parameters, lora_modules, unload_lora
from _common import bench, table, train_step, forward, llama_args, small_llama

def main():
    a = llama_args(__doc__)
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    base, ids = small_llama(a, dev, dt)

    ours = add_lora(copy.deepcopy(base), 'all-linear', r=a.r, alpha=2*a.r)
    for p_ in lora_parameters(ours): nn.init.normal_(p_, std=0.02)
    peft = get_peft_model(copy.deepcopy(base), LoraConfig(r=a.r, lora_alpha=2*a.r, target_modules='all-linear',
                                                         lora_dropout=0.), autocast_adapter_dtype=False)
    for n, m in lora_modules(ours).items():
        pm = peft.base_model.model.get_submodule(n)
        with torch.no_grad(): pm.lora_A['default'].weight.copy_(m.A); pm.lora_B['default'].weight.copy_(m.B)
    with torch.no_grad():
        err = (ours(input_ids=ids).logits.float() - peft(input_ids=ids).logits.float()).abs().max().item()
    opt_o = torch.optim.AdamW(lora_parameters(ours), lr=1e-4)
    opt_p = torch.optim.AdamW([q for q in peft.parameters() if q.requires_grad], lr=1e-4)
    n_o = sum(q.numel() for q in lora_parameters(ours)); n_p = sum(q.numel() for q in peft.parameters() if q.requires_grad)

    cases = [('forward, adapters unmerged', forward(ours.eval(), ids), forward(peft.eval(), ids)),
             ('train step (fwd+bwd+AdamW)', train_step(ours.train(), ids, opt_o), train_step(peft.train(), ids, opt_p))]
    rows = bench(cases, a.reps, dev)
    merged_o, merged_p = unload_lora(copy.deepcopy(ours)).eval(), copy.deepcopy(peft).merge_and_unload().eval()
    rows += bench([('forward, merged and unloaded', forward(merged_o, ids), forward(merged_p, ids))], a.reps, dev)

    print(f"Llama hidden={a.hidden} layers={a.layers} batch={a.bs}x{a.seq} r={a.r} all-linear, {dev.type} {a.dtype}, "
          f"{a.reps} reps, torch {torch.__version__}")
    print(f"trainable params: lorakit {n_o:,}, PEFT {n_p:,}; max |logit difference| {err:.2e}\n")
    print(table(rows, 'PEFT'))

if __name__ == '__main__': main()
