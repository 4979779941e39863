#!/usr/bin/env python
"""lorakit's NF4 against bitsandbytes', side by side in one run: quantize and dequantize a 4096 x 4096 weight.

    python bench/nf4.py                      # CPU
    python bench/nf4.py --device cuda        # a GPU, where bitsandbytes has CUDA kernels

Each case runs lorakit and bitsandbytes in alternation, `--reps` times after a warm-up, and reports
medians. The machine is shared and noisy: read the ratio column, not the milliseconds. Every lorakit
result is checked bit for bit against bitsandbytes' before it is timed.
"""
import argparse, warnings
import torch
import bitsandbytes.functional as bnbF
from lorakit.core import get_device, get_dtype, set_seed
from lorakit.nf4 import quantize_nf4, dequantize_nf4, dequantize_nf4_ref
from _common import bench, table

def cases_for(w, dev):
    "The benchmark cases for one weight, after checking lorakit's results equal bitsandbytes'."
    q = quantize_nf4(w, 64, double_quant=True)
    packed, st = bnbF.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type='nf4')
    q1 = quantize_nf4(w, 64, double_quant=False)
    packed1, st1 = bnbF.quantize_4bit(w, blocksize=64, quant_type='nf4')
    assert torch.equal(q.packed, packed.view(-1)) and torch.equal(q1.absmax, st1.absmax)
    assert torch.equal(dequantize_nf4(q1), bnbF.dequantize_4bit(packed1, st1))
    buf = torch.empty_like(w)
    dt = str(w.dtype).removeprefix('torch.')
    return [(f'quantize {dt} (double quant)', lambda: quantize_nf4(w, 64, True),
             lambda: bnbF.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type='nf4')),
            (f'dequantize {dt}, readable reference', lambda: dequantize_nf4_ref(q1), lambda: bnbF.dequantize_4bit(packed1, st1)),
            (f'dequantize {dt}, new output', lambda: dequantize_nf4(q1), lambda: bnbF.dequantize_4bit(packed1, st1)),
            (f'dequantize {dt}, into a reused buffer', lambda: dequantize_nf4(q1, out=buf), lambda: bnbF.dequantize_4bit(packed1, st1)),
            (f'dequantize {dt} (double quant), reused buffer', lambda: dequantize_nf4(q, out=buf), lambda: bnbF.dequantize_4bit(packed, st))]

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--device', default=None); p.add_argument('--size', type=int, default=4096)
    p.add_argument('--reps', type=int, default=9)
    a = p.parse_args()
    warnings.filterwarnings('ignore')
    dev = get_device(a.device)
    set_seed(0)
    rows = []
    for dt in ('fp32', 'bf16'):
        w = torch.randn(a.size, a.size, device=dev).to(get_dtype(dt))
        rows += bench(cases_for(w, dev), a.reps, dev)
    print(f"NF4, blocksize 64, {a.size} x {a.size}, {dev.type}, {torch.get_num_threads()} threads, {a.reps} reps, torch {torch.__version__}")
    print("bitsandbytes' CPU dequantize has no out= buffer, so its column is the same call in every dequantize row.\n")
    print(table(rows, 'bnb'))

if __name__ == '__main__': main()
