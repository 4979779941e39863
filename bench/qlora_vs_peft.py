#!/usr/bin/env python
"""lorakit's QLoRA against bitsandbytes' Linear4bit with PEFT's LoRA, side by side in one run.

    python bench/qlora_vs_peft.py                          # CPU, a small Llama, float32
    python bench/qlora_vs_peft.py --dtype bf16
    python bench/qlora_vs_peft.py --device cuda --dtype bf16 --hidden 2048 --layers 8

Both models start from the same Llama, hold the same NF4 bytes (blocksize 64, double quantization)
and the same adapters. Each case runs the two in alternation, `--reps` times after a warm-up, and
reports medians: read the ratio column, not the milliseconds. Needs the dev extra (peft, transformers).
"""
import copy
import torch, torch.nn as nn
import bitsandbytes as bnb
from peft import LoraConfig, get_peft_model
from lorakit.core import get_device, get_dtype, count_params
from lorakit.inject import add_lora, lora_parameters, lora_modules, find_targets, set_module
from lorakit.qlora import quantize_base
from _common import bench, table, train_step, forward, llama_args, small_llama

def bnb_peft(base, r, dev, dt):
    "The reference QLoRA: every linear layer but the head a bitsandbytes Linear4bit, PEFT's LoRA on top."
    ref = copy.deepcopy(base)
    for n in find_targets(ref):
        lin = ref.get_submodule(n)
        lin4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None, compute_dtype=dt,
                                 quant_type='nf4', compress_statistics=True)
        lin4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4', compress_statistics=True)
        set_module(ref, n, lin4.to(dev))
    return get_peft_model(ref, LoraConfig(r=r, lora_alpha=2*r, target_modules='all-linear', lora_dropout=0.), autocast_adapter_dtype=False)

def main():
    a = llama_args(__doc__)
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    base, ids = small_llama(a, dev, dt)

    ours = add_lora(quantize_base(copy.deepcopy(base)), r=a.r, alpha=2*a.r)
    ref = bnb_peft(base, a.r, dev, dt)
    for n, m in lora_modules(ours).items():
        nn.init.normal_(m.B, std=0.02)
        pm = ref.base_model.model.get_submodule(n)
        assert torch.equal(pm.base_layer.weight.view(-1), m.base.q.packed)
        with torch.no_grad(): pm.lora_A['default'].weight.copy_(m.A); pm.lora_B['default'].weight.copy_(m.B)
    with torch.no_grad():
        y_o, y_r = ours(input_ids=ids).logits.float(), ref(input_ids=ids).logits.float()
    err = ((y_o - y_r).abs().max() / y_r.abs().max()).item()
    opt_o = torch.optim.AdamW(lora_parameters(ours), lr=1e-4)
    opt_r = torch.optim.AdamW([q for q in ref.parameters() if q.requires_grad], lr=1e-4)

    rows = bench([('forward', forward(ours.eval(), ids), forward(ref.eval(), ids)),
                  ('train step (fwd+bwd+AdamW)', train_step(ours.train(), ids, opt_o), train_step(ref.train(), ids, opt_r))], a.reps, dev)
    print(f"QLoRA: Llama hidden={a.hidden} layers={a.layers} batch={a.bs}x{a.seq} r={a.r} all-linear, NF4 blocksize 64 + double quant, "
          f"{dev.type} {a.dtype}, {a.reps} reps, torch {torch.__version__}, bitsandbytes {bnb.__version__}")
    print(f"lorakit {count_params(ours)}; PEFT trainable {ref.get_nb_trainable_parameters()[0]:,}; "
          f"max |logit difference| / max |logit| = {err:.1e}\n")
    print(table(rows, 'bnb+PEFT'))

if __name__ == '__main__': main()
