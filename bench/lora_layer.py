#!/usr/bin/env python
"""One LoRA layer, forward and backward: lorakit's fused update (one `addmm`) against the same sum written out.

    python bench/lora_layer.py                  # CPU, 1024 tokens through a 1024 x 1024 layer, r 16
    python bench/lora_layer.py --tokens 4096 --width 2048 --r 64

The written-out version computes `y + scale * (h @ B.T)` as a matmul, a multiply and an add, which is
how a LoRA forward is usually written; lorakit's `LoRALinear` hands the same sum to BLAS in one call.
Both run in alternation, `--reps` times after a warm-up; medians. Read the ratio, not the milliseconds.
"""
import argparse
import torch, torch.nn.functional as F
from lorakit.core import set_seed, get_device
from lorakit.lora import LoRALinear
from _common import bench, table

class Unfused(LoRALinear):
    "The same layer with the update added as a matmul, a multiply and an add."
    def forward(self, x): return self.base(x) + self.scale * F.linear(F.linear(self.dropout(x), self.A), self.B)

def fwd_bwd(m, x):
    def f():
        m(x).sum().backward(); m.A.grad = m.B.grad = x.grad = None
    return f

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--tokens', type=int, default=1024); p.add_argument('--width', type=int, default=1024)
    p.add_argument('--r', type=int, default=16); p.add_argument('--reps', type=int, default=50)
    p.add_argument('--device', default=None)
    a = p.parse_args()
    dev = get_device(a.device); set_seed(0)
    base = torch.nn.Linear(a.width, a.width, device=dev)
    ours, ref = LoRALinear(base, r=a.r, alpha=2*a.r), Unfused(base, r=a.r, alpha=2*a.r)
    with torch.no_grad(): ref.A.copy_(ours.A); ours.B.normal_(std=0.02); ref.B.copy_(ours.B)
    x = torch.randn(a.tokens, a.width, device=dev, requires_grad=True)
    torch.testing.assert_close(ours(x), ref(x))
    with torch.no_grad(): fwd = bench([('forward', lambda: ours(x), lambda: ref(x))], a.reps, dev)
    rows = fwd + bench([('forward + backward', fwd_bwd(ours, x), fwd_bwd(ref, x))], a.reps, dev)
    print(f"LoRA layer {a.width}x{a.width}, r {a.r}, {a.tokens} tokens, {dev.type} fp32, {a.reps} reps, torch {torch.__version__}\n")
    print(table(rows, 'written out'))

if __name__ == '__main__': main()
