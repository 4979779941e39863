"Timing shared by the bench scripts: lorakit and a reference, run in alternation, medians over repeats."
import statistics, time
import torch

def _sync(dev):
    if dev.type == 'cuda': torch.cuda.synchronize()

def time_once(fn, dev):
    "Seconds one call of `fn` takes on `dev`, the device synchronized before and after."
    _sync(dev); t = time.perf_counter(); fn(); _sync(dev)
    return time.perf_counter() - t

def bench(cases, reps, dev):
    "Median seconds of each (name, lorakit fn, reference fn) case, after a warm-up, the two timed in alternation."
    rows = []
    for name, ours, ref in cases:
        ours(); ref()
        to, tr = [], []
        for _ in range(reps): to.append(time_once(ours, dev)); tr.append(time_once(ref, dev))
        rows.append((name, statistics.median(to), statistics.median(tr)))
    return rows

def table(rows, ref_name, unit='ms'):
    "A markdown table of `bench` rows with the lorakit / reference ratio, times in `unit` (ms or us)."
    k = {'ms': 1e3, 'us': 1e6}[unit]
    out = [f"| case | lorakit {unit} | {ref_name} {unit} | lorakit / {ref_name} |", "|---|---:|---:|---:|"]
    out += [f"| {name} | {to*k:.1f} | {tr*k:.1f} | {to/tr:.2f} |" for name, to, tr in rows]
    return '\n'.join(out)

def train_step(model, ids, opt):
    "One causal-LM step on `ids`: forward, backward, optimizer step."
    def step():
        model(input_ids=ids, labels=ids).loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    return step

def forward(model, ids):
    "A forward pass on `ids` without gradients."
    def fwd():
        with torch.no_grad(): model(input_ids=ids)
    return fwd

def llama_args(doc):
    "Command-line arguments shared by the Llama benchmarks."
    import argparse
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument('--device', default=None); p.add_argument('--dtype', default='fp32')
    p.add_argument('--hidden', type=int, default=256); p.add_argument('--layers', type=int, default=4)
    p.add_argument('--bs', type=int, default=8); p.add_argument('--seq', type=int, default=128)
    p.add_argument('--r', type=int, default=16); p.add_argument('--reps', type=int, default=7)
    return p.parse_args()

def small_llama(a, dev, dt):
    "A randomly initialised transformers Llama sized by `a`, and a batch of token ids for it."
    import warnings
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging
    from lorakit.core import set_seed
    hf_logging.set_verbosity_error(); warnings.filterwarnings('ignore')
    cfg = LlamaConfig(vocab_size=2048, hidden_size=a.hidden, intermediate_size=int(a.hidden*8/3)//64*64,
                      num_hidden_layers=a.layers, num_attention_heads=max(a.hidden//64, 1),
                      num_key_value_heads=max(a.hidden//128, 1), max_position_embeddings=a.seq)
    set_seed(0)
    return LlamaForCausalLM(cfg).to(dev, dt), torch.randint(0, cfg.vocab_size, (a.bs, a.seq), device=dev)

def bnb_nf4_base(model, compute_dtype=torch.float32):
    "A transformers model's linear layers but the head as bitsandbytes Linear4bit: NF4, block 64, double quant."
    import bitsandbytes as bnb
    from lorakit.inject import find_targets, set_module
    for n in find_targets(model):
        lin = model.get_submodule(n)
        l4 = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=False, compute_dtype=compute_dtype,
                               quant_type='nf4', compress_statistics=True)
        l4.weight = bnb.nn.Params4bit(lin.weight.detach().clone(), requires_grad=False, quant_type='nf4',
                                      compress_statistics=True)
        set_module(model, n, l4.to('cpu'))  # Params4bit quantizes on .to(device)
    return model
