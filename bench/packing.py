#!/usr/bin/env python
"""Packing without cross-talk against padding: what a training pass over the same conversations costs each way.

    python bench/packing.py            # SmolLM2-135M-Instruct (QLoRA) on pydoc_chats, and the shipped base on paragraphs of Python's docs
    python bench/packing.py --quick    # the shipped base only, fewer documents

Three ways to lay out the same documents in rows of `seq_len` tokens, each timed as forward + backward of the LoRA
model over all of them, in batches of `bs` rows:
- padded: one document per row, padded to seq_len (06b_instruct's `chat_data`); no cross-talk, padding costs compute;
- packed + doc mask: documents end to end, `doc_ids` passed to the model (05_model: positions restart per document,
  block-diagonal causal attention); no cross-talk, little padding;
- packed, plain causal: the same rows without `doc_ids`: what packing costs without the mask, with cross-talk.
Documents longer than seq_len are left out of all three, so every layout holds the same tokens. Medians over --reps.
"""
import argparse, statistics, time
import torch
from lorakit.core import set_seed
from lorakit.inject import add_lora
from lorakit.model import Llama
from lorakit.qlora import QuantSpec

def padded(docs, seq_len, pad):
    x = torch.full((len(docs), seq_len), pad); y = torch.full((len(docs), seq_len), -100)
    for i, d in enumerate(docs): x[i, :len(d)-1], y[i, :len(d)-1] = torch.tensor(d[:-1]), torch.tensor(d[1:])
    return x, y, None

def packed(docs, seq_len, pad):
    "Documents end to end, cut into rows; a document cut at a row end continues as a new document in the next row."
    ids, dids, labels, n = [], [], [], 0
    for d in docs:
        ids += d[:-1]; labels += d[1:]; dids += [n]*(len(d)-1); n += 1
    rows = -(-len(ids) // seq_len); tail = rows*seq_len - len(ids)
    ids += [pad]*tail; labels += [-100]*tail; dids += [n]*tail
    x, y, dd = (torch.tensor(t).view(rows, seq_len) for t in (ids, labels, dids))
    return x, y, dd - dd[:, :1]  # ids from 0 in each row

def pass_time(model, x, y, d, bs, use_mask):
    t = time.perf_counter()
    for i in range(0, len(x), bs):
        logits = model(x[i:i+bs], doc_ids=d[i:i+bs] if (use_mask and d is not None) else None)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), y[i:i+bs].flatten(), ignore_index=-100).backward()
    model.zero_grad(set_to_none=True)
    return time.perf_counter() - t

def run(name, model, docs, seq_len, bs, pad, reps):
    docs = [d for d in docs if 2 <= len(d) <= seq_len + 1]
    layouts = {'padded': (padded(docs, seq_len, pad), False), 'packed + doc mask': (packed(docs, seq_len, pad), True),
               'packed, plain causal': (packed(docs, seq_len, pad), False)}
    useful = sum(len(d) - 1 for d in docs)
    times = {k: [] for k in layouts}
    for k, ((x, y, d), m) in layouts.items(): pass_time(model, x[:bs], y[:bs], None if d is None else d[:bs], bs, m)  # warm-up
    for _ in range(reps):
        for k, ((x, y, d), m) in layouts.items(): times[k].append(pass_time(model, x, y, d, bs, m))
    base = statistics.median(times['padded'])
    print(f"\n### {name}: {len(docs)} documents, {useful} tokens to learn from, rows of {seq_len}, batches of {bs}\n")
    print("| layout | rows | padding share | s per pass (median) | / padded | useful tokens/s |\n|---|---:|---:|---:|---:|---:|")
    for k, ((x, y, d), m) in layouts.items():
        med = statistics.median(times[k])
        print(f"| {k} | {len(x)} | {1 - useful/x.numel():.2f} | {med:.2f} | {med/base:.2f} | {useful/med:.0f} |")

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--quick', action='store_true'); p.add_argument('--reps', type=int, default=3)
    a = p.parse_args()
    from lorakit.pretrain import base_path
    from lorakit.data import load_tokenizer, pydoc_docs
    set_seed(0)
    base = add_lora(Llama.from_pretrained(base_path(), dtype='float32', device='cpu', quant=QuantSpec()), dropout=0.)
    tok = load_tokenizer(base_path())
    paras = [q for t in pydoc_docs() for q in t.split('\n\n') if q.strip()][:(300 if a.quick else 1000)]
    docs = [tok.encode(t, bos=True, eos=True) for t in paras]
    run("the shipped base (byte tokens), QLoRA, paragraphs of Python's docs", base, docs, 256, 8, tok.eos_id, 1 if a.quick else a.reps)
    if a.quick: return
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.instruct import pydoc_chats, encode_chat
    ck = smollm2_checkpoint(); tok = load_tokenizer(ck)
    smol = add_lora(Llama.from_pretrained(ck, dtype='float32', device='cpu', quant=QuantSpec()), dropout=0.)
    docs = [encode_chat(tok, c)[0] for c in pydoc_chats()[:40]]
    run("SmolLM2-135M-Instruct, QLoRA, pydoc_chats", smol, docs, 256, 4, tok.eos_id, a.reps)

if __name__ == '__main__': main()
