#!/usr/bin/env python
"""lorakit's NF4 against bitsandbytes', side by side in one run: quantize and dequantize a 4096 x 4096 weight.

    python bench/nf4.py                      # CPU
    python bench/nf4.py --device cuda        # a GPU, where bitsandbytes has CUDA kernels
    python bench/nf4.py --dispatch           # only the dequantize a QLoRA matmul runs, at real models' shapes
    python bench/nf4.py --quick              # fewer reps and no quantize/reference rows: the two tables in a minute

Each case runs lorakit and bitsandbytes in alternation, `--reps` times after a warm-up, and reports
medians. The machine is shared and noisy: read the ratio column, not the milliseconds. Every lorakit
result is checked bit for bit against bitsandbytes' before it is timed.
"""
import argparse, warnings
import torch
from lorakit.core import get_device, get_dtype, set_seed
from lorakit.nf4 import quantize_nf4, dequantize_nf4, dequantize_nf4_ref
from lorakit.qlora import dequantize_for_matmul, bnb_quant_state  # before bitsandbytes: it quiets its log line
import bitsandbytes.functional as bnbF
from _common import bench, table

def cases_for(w, dev, quick=False):
    "The benchmark cases for one weight, after checking lorakit's results equal bitsandbytes'."
    q = quantize_nf4(w, 64, double_quant=True)
    packed, st = bnbF.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type='nf4')
    q1 = quantize_nf4(w, 64, double_quant=False)
    packed1, st1 = bnbF.quantize_4bit(w, blocksize=64, quant_type='nf4')
    assert torch.equal(q.packed, packed.view(-1)) and torch.equal(q1.absmax, st1.absmax)
    assert torch.equal(dequantize_nf4(q1), bnbF.dequantize_4bit(packed1, st1))
    buf = torch.empty_like(w)
    dt = str(w.dtype).removeprefix('torch.')
    cases = [(f'quantize {dt} (double quant)', lambda: quantize_nf4(w, 64, True),
             lambda: bnbF.quantize_4bit(w, blocksize=64, compress_statistics=True, quant_type='nf4')),
            (f'dequantize {dt}, readable reference', lambda: dequantize_nf4_ref(q1), lambda: bnbF.dequantize_4bit(packed1, st1)),
            (f'dequantize {dt}, new output', lambda: dequantize_nf4(q1), lambda: bnbF.dequantize_4bit(packed1, st1)),
            (f'dequantize {dt}, into a reused buffer', lambda: dequantize_nf4(q1, out=buf), lambda: bnbF.dequantize_4bit(packed1, st1)),
            (f'dequantize {dt} (double quant), reused buffer', lambda: dequantize_nf4(q, out=buf), lambda: bnbF.dequantize_4bit(packed, st))]
    return [c for c in cases if 'new output' in c[0] or 'reused' in c[0]] if quick else cases

# (out, in) of every projection of the shipped base (hidden 256) and of SmolLM2-135M (hidden 576)
SHAPES = {'base': [(256, 256), (128, 256), (688, 256), (256, 688)],
          'SmolLM2': [(576, 576), (192, 576), (1536, 576), (576, 1536)]}

def dispatch_cases(dev):
    """lorakit's own dequantize as `NF4Linear` runs it (`dequantize_for_matmul(..., backend='torch')`, into the
    workspace) against bitsandbytes handed the weight's own shape, as `Linear4bit` does (a fresh output each call).
    lorakit's result is checked against `dequantize_nf4` first; bitsandbytes' is only reported."""
    cases, wrong = [], []
    for model, shapes in SHAPES.items():
        for shape in shapes:
            for dt in (torch.float32, torch.bfloat16):
                q = quantize_nf4(torch.randn(shape, device=dev).to(dt), 64, double_quant=True)
                ref, st = dequantize_nf4(q), bnb_quant_state(q)
                assert torch.equal(dequantize_for_matmul(q, dt, 'torch'), ref)
                theirs = lambda q=q, st=st: bnbF.dequantize_4bit(q.packed[:, None], st)
                if not torch.equal(theirs(), ref): wrong.append(f'{shape[0]}x{shape[1]} {dt}')
                name = f'{model} {shape[0]}x{shape[1]} {str(dt).removeprefix("torch.")}'
                cases.append((name, lambda q=q, dt=dt: dequantize_for_matmul(q, dt, 'torch'), theirs))
    return cases, wrong

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--device', default=None); p.add_argument('--size', type=int, default=4096)
    p.add_argument('--reps', type=int, default=9)
    p.add_argument('--dispatch', action='store_true', help="only time dequantize_for_matmul at real models' shapes")
    p.add_argument('--quick', action='store_true', help='5 reps, only the dequantize rows')
    a = p.parse_args()
    if a.quick: a.reps = min(a.reps, 5)
    warnings.filterwarnings('ignore')
    dev = get_device(a.device)
    set_seed(0)
    if not a.dispatch: big(a, dev)
    cases, wrong = dispatch_cases(dev)
    rows = bench(cases, a.reps, dev)
    print(f"\ndequantize_for_matmul(backend='torch') against bitsandbytes' dequantize_4bit on the weight's own shape, NF4 "
          f"blocksize 64, double quant, {dev.type}, capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{a.reps} reps")
    print(f"bitsandbytes' own-shape call gave other values than lorakit's for: {', '.join(wrong) or 'none'}\n")
    print(table(rows, 'bnb', 'us'))

def big(a, dev):
    "The 4096 x 4096 table: fresh and reused buffers, float32 and bfloat16."
    rows = []
    for dt in ('fp32', 'bf16'):
        w = torch.randn(a.size, a.size, device=dev).to(get_dtype(dt))
        rows += bench(cases_for(w, dev, a.quick), a.reps, dev)
    print(f"NF4, blocksize 64, {a.size} x {a.size}, {dev.type}, {torch.get_num_threads()} threads, {a.reps} reps, torch {torch.__version__}")
    print("bitsandbytes' CPU dequantize has no out= buffer, so its column is the same call in every dequantize row.\n")
    print(table(rows, 'bnb'))

if __name__ == '__main__': main()
