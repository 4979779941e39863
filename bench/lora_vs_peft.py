#!/usr/bin/env python
"""lorakit's LoRA against PEFT's, side by side in one run: the same Llama, the same adapters, the same steps.

    python bench/lora_vs_peft.py                 # CPU, a small Llama
    python bench/lora_vs_peft.py --device cuda --dtype bf16 --hidden 1024 --layers 8

Each case runs lorakit and PEFT in alternation, `--reps` times after a warm-up, and reports medians.
The machine is shared and noisy: read the ratio column, not the milliseconds.
Needs the dev extra (peft, transformers).
"""
import argparse, copy, warnings
import torch, torch.nn as nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.utils import logging as hf_logging
from peft import LoraConfig, get_peft_model
from lorakit.core import set_seed, get_device, get_dtype
from lorakit.inject import add_lora, lora_parameters, lora_modules, unload_lora
from _timing import bench, table

def _train_step(model, ids, opt):
    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    return step

def _forward(model, ids):
    def fwd():
        with torch.no_grad(): model(input_ids=ids)
    return fwd

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--device', default=None); p.add_argument('--dtype', default='fp32')
    p.add_argument('--hidden', type=int, default=256); p.add_argument('--layers', type=int, default=4)
    p.add_argument('--bs', type=int, default=8); p.add_argument('--seq', type=int, default=128)
    p.add_argument('--r', type=int, default=16); p.add_argument('--reps', type=int, default=7)
    a = p.parse_args()
    hf_logging.set_verbosity_error(); warnings.filterwarnings('ignore')
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    cfg = LlamaConfig(vocab_size=2048, hidden_size=a.hidden, intermediate_size=int(a.hidden*8/3)//8*8,
                      num_hidden_layers=a.layers, num_attention_heads=max(a.hidden//64, 1),
                      num_key_value_heads=max(a.hidden//128, 1), max_position_embeddings=a.seq)
    set_seed(0)
    base = LlamaForCausalLM(cfg).to(dev, dt)
    ids = torch.randint(0, cfg.vocab_size, (a.bs, a.seq), device=dev)

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

    cases = [('forward, adapters unmerged', _forward(ours.eval(), ids), _forward(peft.eval(), ids)),
             ('train step (fwd+bwd+AdamW)', _train_step(ours.train(), ids, opt_o), _train_step(peft.train(), ids, opt_p))]
    rows = bench(cases, a.reps, dev)
    merged_o, merged_p = unload_lora(copy.deepcopy(ours)).eval(), copy.deepcopy(peft).merge_and_unload().eval()
    rows += bench([('forward, merged and unloaded', _forward(merged_o, ids), _forward(merged_p, ids))], a.reps, dev)

    print(f"Llama hidden={a.hidden} layers={a.layers} batch={a.bs}x{a.seq} r={a.r} all-linear, {dev.type} {a.dtype}, "
          f"{a.reps} reps, torch {torch.__version__}")
    print(f"trainable params: lorakit {n_o:,}, PEFT {n_p:,}; max |logit difference| {err:.2e}\n")
    print(table(rows, 'PEFT'))

if __name__ == '__main__': main()
