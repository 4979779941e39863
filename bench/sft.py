#!/usr/bin/env python
"""Instruction tuning SmolLM2-135M-Instruct with QLoRA on CPU: held-out answers and loss before and after.

    python bench/sft.py                  # 60 steps of 4 packed rows of 256 tokens, lr 1e-3; it prints the time a step
    python bench/sft.py --steps 10       # shorter
    python bench/sft.py --no-pack        # one conversation a row, padded

The data is 06b_instruct's `pydoc_chats`: a question per topic of Python's reference docs, answered by the topic's opening,
split by topic, so every held-out question is about a topic the run never saw. The loss is on the assistant's tokens only.
Printed: the held-out loss before and after, the time per step, and for the first `--show` held-out questions the greedy
answers before and after (up to the end-of-turn token, at most `--max-new` tokens), next to the reference answer's opening.
"""
import argparse, time, warnings
import torch

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--steps', type=int, default=60); p.add_argument('--bs', type=int, default=4)
    p.add_argument('--seq-len', type=int, default=256); p.add_argument('--lr', type=float, default=1e-3)
    p.add_argument('--r', type=int, default=16); p.add_argument('--show', type=int, default=3)
    p.add_argument('--max-new', type=int, default=48); p.add_argument('--no-pack', action='store_true')
    a = p.parse_args()
    warnings.filterwarnings('ignore')
    from lorakit.core import set_seed
    from lorakit.data import load_tokenizer
    from lorakit.model import Llama, generate
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.inject import add_lora
    from lorakit.qlora import QuantSpec
    from lorakit.train import TrainConfig
    from lorakit.run import train
    from lorakit.memory import ChunkedLMLoss
    from lorakit.objective import evaluate_lm
    from lorakit.instruct import pydoc_chats, chat_data
    ckpt = smollm2_checkpoint()
    tok = load_tokenizer(ckpt)
    data, held, skipped = chat_data(pydoc_chats(), tok, a.seq_len, on_bad='skip', pack=not a.no_pack)
    set_seed(0)
    model = add_lora(Llama.from_pretrained(ckpt, dtype='float32', device='cpu', quant=QuantSpec()), r=a.r, alpha=2*a.r, dropout=0.)
    def answers():
        out = []
        for c in held[:a.show]:
            ids = torch.tensor([tok.apply_chat_template(c.messages[:1], add_generation_prompt=True)])
            out.append(tok.decode(generate(model, ids, a.max_new, temperature=0, eos_id=tok.eos_id)[0, ids.shape[1]:]).strip())
        return out
    valid = lambda: evaluate_lm(model, data.xv, data.yv, a.bs, doc_ids=data.dv)
    v0, before = valid(), answers()
    cfg = TrainConfig(lr=a.lr, steps=a.steps, bs=a.bs, seq_len=a.seq_len, warmup=max(1, a.steps // 10), eval_every=a.steps, eval_batches=len(data.xv), dropout=0.)
    t = time.perf_counter()
    hist = train(model, data, cfg, progress=False, loss_fn=ChunkedLMLoss())
    sec = (time.perf_counter() - t) / a.steps
    v1, after = valid(), answers()
    print(f"SmolLM2-135M-Instruct, QLoRA all-linear r {a.r}, {a.steps} steps of {a.bs} x {a.seq_len} "
          f"({'packed' if not a.no_pack else 'one conversation a row'}: {len(data.xt)} training rows, {len(held)} held-out topics), lr {a.lr}, CPU\n")
    print(f"| | held-out loss (assistant tokens) |\n|---|---:|\n| before | {v0:.3f} |\n| after | {v1:.3f} |\n")
    print(f"{sec:.2f} s a step; training loss {hist[0]['loss']:.3f} at step 1, {hist[-1]['loss']:.3f} at step {a.steps}\n")
    for c, b, f in zip(held, before, after):
        ref = c.messages[1]['content'][:160].replace('\n', ' ')
        print(f"Q: {c.messages[0]['content']}\n  reference: {ref}…\n  before: {b!r}\n  after:  {f!r}\n")

if __name__ == '__main__': main()
