#!/usr/bin/env python
"""Fused projections (04b's `fused_linear`) on a QLoRA step of SmolLM2-135M: on against off, and the costs around them.

    python bench/fuse.py                  # batch 2 x 256, all-linear r 8, fp32 CPU: step times, peak RSS, the mm profile
    python bench/fuse.py --quick          # 3 timed rounds, no profile: a check that the script runs
    python bench/fuse.py --dropout 0.05   # the job's default dropout: the A's stay per layer, the bases are stacked
    python bench/fuse.py --rope --sdpa    # also: rope's runtime shape check per step; SDPA causal against a document mask

1. Step time: one model, the modes alternating step by step in one process (`--modes`, default True,lora,False: the
   A's and the bases stacked, the A's only, nothing), the median of `--rounds` steps each. Loss: 10_memory's
   `ChunkedLMLoss`, what `lorakit-train` uses; AdamW on the LoRA weights.
2. Peak RSS: each mode in a fresh process of its own, 2 steps, ru_maxrss.
3. Profile: one step per mode under torch.profiler, the self time of aten::mm / aten::addmm and the count of calls.
Read the ratios, not the times: this machine is shared and noisy.
"""
import argparse, json, resource, statistics, subprocess, sys, time, warnings

def parse_mode(s): return {'True': True, 'False': False, 'lora': 'lora'}[s]

def build(a):
    import torch
    from lorakit.model import Llama
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.qlora import QuantSpec
    from lorakit.inject import add_lora
    from lorakit.objective import LMBatch
    from lorakit.memory import ChunkedLMLoss
    torch.manual_seed(0)
    quant = None if a.quant == 'none' else QuantSpec(a.quant)
    model = add_lora(Llama.from_pretrained(smollm2_checkpoint(), quant=quant), r=a.r, alpha=2*a.r, dropout=a.dropout)
    x = torch.randint(0, model.config.vocab_size, (a.bs, a.seq))
    y = torch.cat([x[:, 1:], torch.full_like(x[:, :1], -100)], 1)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    loss_fn = ChunkedLMLoss()
    def step():
        loss_fn(model, LMBatch(x, y)).backward(); opt.step(); opt.zero_grad(set_to_none=True)
    return model, step

def times(a):
    model, step = build(a)
    modes = [parse_mode(m) for m in a.modes.split(',')]
    for m in modes: model.fuse_projections(m); step()  # warm-up
    ts = {m: [] for m in modes}
    for _ in range(a.rounds):
        for m in modes:
            model.fuse_projections(m); t = time.perf_counter(); step(); ts[m].append(time.perf_counter() - t)
    return {str(m): statistics.median(v) for m, v in ts.items()}, model, step

def profile(model, step, modes):
    import torch
    from torch.profiler import profile as prof, ProfilerActivity
    out = {}
    for m in modes:
        model.fuse_projections(m); step()
        with prof(activities=[ProfilerActivity.CPU]) as p: step()
        ev = {e.key: e for e in p.key_averages()}
        out[str(m)] = {k: (ev[k].self_cpu_time_total / 1e3, ev[k].count) for k in ('aten::mm', 'aten::addmm') if k in ev}
    return out

def rss_one(a):
    warnings.filterwarnings('ignore')
    model, step = build(a)
    model.fuse_projections(parse_mode(a.modes))
    for _ in range(2): step()
    print(json.dumps(dict(mode=a.modes, rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))

def rope_cost(reps=200):
    "Seconds per step spent in rope's jaxtyping/beartype check: checked minus unchecked, 2 calls a layer x 30 layers."
    import torch
    import inspect
    from lorakit.model import rope, rope_frequencies, LlamaConfig
    unchecked = inspect.unwrap(rope)  # without jaxtyping's and beartype's wrappers
    cfg = LlamaConfig(hidden_size=576, num_attention_heads=9, num_key_value_heads=3)
    q, pos, inv = torch.randn(2, 9, 256, 64), torch.arange(256), rope_frequencies(cfg)
    res = {}
    for _ in range(3):
        for name, f in (('checked', rope), ('unchecked', unchecked)):
            t = time.perf_counter()
            for _ in range(reps): f(q, pos, inv)
            res.setdefault(name, []).append((time.perf_counter() - t) / reps)
    c, u = statistics.median(res['checked']), statistics.median(res['unchecked'])
    return dict(checked_ms=c * 1e3, unchecked_ms=u * 1e3, check_ms_per_step=(c - u) * 60 * 1e3)

def sdpa_cost(bs=2, T=256, reps=20):
    "Which kernel SDPA runs, and its forward + backward time, causal against a packed-rows document mask."
    import torch, torch.nn.functional as F
    from torch.profiler import profile as prof, ProfilerActivity
    from lorakit.model import doc_mask
    q = torch.randn(bs, 9, T, 64, requires_grad=True)
    k, v = torch.randn(bs, 3, T, 64, requires_grad=True), torch.randn(bs, 3, T, 64, requires_grad=True)
    docs = torch.arange(T).div(T // 4, rounding_mode='floor').expand(bs, T)  # 4 documents a row
    cases = {'is_causal': dict(is_causal=True), 'doc mask (bool)': dict(attn_mask=doc_mask(docs)),
             'doc mask (float)': dict(attn_mask=torch.zeros(bs, 1, T, T).masked_fill(~doc_mask(docs), float('-inf')))}
    out = {}
    for name, kw in cases.items():
        f = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw).sum().backward()
        f()
        with prof(activities=[ProfilerActivity.CPU]) as p: f()
        kern = sorted({e.key for e in p.key_averages() if 'attention' in e.key and e.key != 'aten::scaled_dot_product_attention'})
        ts = []
        for _ in range(reps):
            t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
        out[name] = (statistics.median(ts) * 1e3, kern)
    return out

def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--bs', type=int, default=2); p.add_argument('--seq', type=int, default=256)
    p.add_argument('--r', type=int, default=8); p.add_argument('--dropout', type=float, default=0.)
    p.add_argument('--quant', default='nf4'); p.add_argument('--rounds', type=int, default=8)
    p.add_argument('--modes', default='True,lora,False')
    p.add_argument('--quick', action='store_true'); p.add_argument('--rope', action='store_true')
    p.add_argument('--sdpa', action='store_true'); p.add_argument('--no-rss', action='store_true')
    p.add_argument('--one', action='store_true', help=argparse.SUPPRESS)
    a = p.parse_args()
    warnings.filterwarnings('ignore')
    if a.one: return rss_one(a)
    if a.quick: a.rounds = 3
    print(f"QLoRA step of SmolLM2-135M, {a.bs}x{a.seq}, all-linear r {a.r}, dropout {a.dropout}, base {a.quant}, fp32 CPU")
    med, model, step = times(a)
    modes = a.modes.split(',')
    rss = {}
    if not (a.quick or a.no_rss):
        for m in modes:
            args = [sys.executable, __file__, '--one', '--modes', m, '--bs', str(a.bs), '--seq', str(a.seq), '--r', str(a.r),
                    '--dropout', str(a.dropout), '--quant', a.quant]
            rss[m] = json.loads(subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])['rss_mb']
    print(f"\n| fuse | step s (median of {a.rounds}) | / fuse=False | peak RSS MiB |\n|---|---:|---:|---:|")
    for m in modes:
        print(f"| {m} | {med[m]:.3f} | {med[m] / med['False']:.3f} | {rss.get(m, float('nan')):.0f} |")
    if not a.quick:
        pr = profile(model, step, [parse_mode(m) for m in modes])
        print("\n| fuse | aten::mm self ms (calls) | aten::addmm self ms (calls) |\n|---|---:|---:|")
        for m in modes:
            c = lambda k: f"{pr[m][k][0]:.0f} ({pr[m][k][1]})" if k in pr[m] else '-'
            print(f"| {m} | {c('aten::mm')} | {c('aten::addmm')} |")
    if a.rope:
        r = rope_cost()
        print(f"\nrope at SmolLM2's q shape (2, 9, 256, 64): checked {r['checked_ms']:.3f} ms, unchecked {r['unchecked_ms']:.3f} ms "
              f"a call; the check costs {r['check_ms_per_step']:.1f} ms a step (60 calls)")
    if a.sdpa:
        print("\n| SDPA, fwd + bwd, 2x9x256x64, GQA 3 KV heads | ms | kernels |\n|---|---:|---|")
        for name, (ms, kern) in sdpa_cost(a.bs, a.seq).items(): print(f"| {name} | {ms:.2f} | {', '.join(kern)} |")

if __name__ == '__main__': main()
