#!/usr/bin/env python
"""Loss curves from four LoRA starts: kaiming, gaussian, PiSSA and LoftQ, on the proxy task and on SmolLM2 QLoRA.

    python bench/init_curves.py                    # the proxy task, then SmolLM2: 20 steps of 2 x 128, one thread
    python bench/init_curves.py --proxy-only       # seconds
    python bench/init_curves.py --steps 10 --lr 5e-4

Proxy task (00_core): `Block(16)`, LoRA r 4 on `l1`, Adam lr 1e-2, batches of 64; in full precision (kaiming, gaussian,
pissa) and on an NF4 base (blocksize 32, no double quantization: kaiming, pissa, loftq). SmolLM2-135M-Instruct: QLoRA
all-linear r 16, alpha 32, AdamW at `--lr` (bench/sft.py's data: pydoc_chats, packed), the same seed and batches for
every start; `kaiming` and `gaussian` quantize the base and add LoRA, `pissa` and `loftq` go through `add_qlora`.
Printed: the training loss at the steps asked for (step 1 is the loss of the start itself), the held-out loss at
the end, and the seconds the start took to compute (the SVDs and the quantization, not the training).
"""
import argparse, time, warnings
import torch

STARTS = ('kaiming', 'gaussian', 'pissa', 'loftq')

def _table(title, rows, at):
    print(f"\n{title}\n")
    print("| start | " + " | ".join(f"step {s}" for s in at) + " | held-out after | start s |")
    print("|---|" + "---:|" * (len(at) + 2))
    for name, losses, held, sec in rows:
        print(f"| {name} | " + " | ".join(f"{losses[s-1]:.4f}" for s in at) + f" | {held:.4f} | {sec:.1f} |")

def proxy(at):
    from lorakit.core import set_seed, proxy_task, Block, fit_proxy
    from lorakit.inject import add_lora
    from lorakit.qlora import QuantSpec, quantize_base, add_qlora
    data, q = proxy_task(), QuantSpec(blocksize=32, double_quant=False, targets=['l1', 'l2'])
    runs = [(f'{i}, full precision', i, None) for i in STARTS[:3]]
    runs += [(f'{i}, NF4 base', i, q) for i in ('kaiming', 'pissa', 'loftq')]
    rows = []
    for name, init, quant in runs:
        set_seed(0)
        blk, t = Block(), time.perf_counter()
        if quant is None: add_lora(blk, ['l1'], r=4, alpha=8, init=init)
        elif init in ('kaiming', 'gaussian'): add_lora(quantize_base(blk, quant), ['l1'], r=4, alpha=8, init=init)
        else: add_qlora(blk, quant, init, targets=['l1'], r=4, alpha=8)
        sec = time.perf_counter() - t
        res = fit_proxy(blk, data, steps=max(at), lr=1e-2, eval_every=max(at))
        rows.append((name, res['train'], res['valid'][-1][1], sec))
    _table("Proxy task (00_core's Block, LoRA r 4 on l1, Adam lr 1e-2, bs 64); loss = cross-entropy", rows, at)

def smollm2(a, at):
    from lorakit.core import set_seed
    from lorakit.data import load_tokenizer
    from lorakit.model import Llama
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.inject import add_lora
    from lorakit.qlora import QuantSpec, quantize_base, add_qlora
    from lorakit.train import TrainConfig
    from lorakit.run import train
    from lorakit.memory import ChunkedLMLoss
    from lorakit.objective import evaluate_lm
    from lorakit.instruct import pydoc_chats, chat_data
    ckpt = smollm2_checkpoint()
    tok = load_tokenizer(ckpt)
    data, held, _ = chat_data(pydoc_chats(), tok, a.seq_len, on_bad='skip', pack=True)
    xv, yv, dv = data.xv[:8], data.yv[:8], data.dv[:8]
    rows = []
    for init in STARTS:
        set_seed(0)
        model, t = Llama.from_pretrained(ckpt, dtype='float32', device='cpu'), time.perf_counter()
        if init in ('kaiming', 'gaussian'):
            add_lora(quantize_base(model, QuantSpec()), r=a.r, alpha=2*a.r, dropout=0., init=init)
        else: add_qlora(model, QuantSpec(), init, r=a.r, alpha=2*a.r, dropout=0.)
        sec = time.perf_counter() - t
        cfg = TrainConfig(lr=a.lr, steps=max(at), bs=a.bs, seq_len=a.seq_len, warmup=2, eval_every=max(at),
                          eval_batches=1, dropout=0., init_lora=init)
        hist = train(model, data, cfg, progress=False, loss_fn=ChunkedLMLoss())
        losses = [h['loss'] for h in hist if 'loss' in h]
        rows.append((init, losses, evaluate_lm(model, xv, yv, a.bs, doc_ids=dv), sec))
        print(f"  {init}: done", flush=True)
    _table(f"SmolLM2-135M-Instruct QLoRA (NF4, all-linear r {a.r}, alpha {2*a.r}), {max(at)} steps of "
           f"{a.bs} x {a.seq_len}, AdamW lr {a.lr}, {torch.get_num_threads()} thread(s); loss = nats a token; "
           f"held-out: the first 8 validation rows", rows, at)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--steps', type=int, default=20); p.add_argument('--bs', type=int, default=2)
    p.add_argument('--seq-len', type=int, default=128); p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--r', type=int, default=16); p.add_argument('--threads', type=int, default=1)
    p.add_argument('--proxy-only', action='store_true')
    a = p.parse_args()
    warnings.filterwarnings('ignore')
    torch.set_num_threads(a.threads)
    at = sorted({s for s in (1, 5, 10, 20, a.steps) if s <= a.steps})
    proxy(at)
    if not a.proxy_only: smollm2(a, at)

if __name__ == '__main__': main()
