"""llama.cpp with its weight repacking off (as lorakit's `LlamaCpp` runs it) against on, side by side.

    python bench/repack.py                      # SmolLM2's shipped Q4_1 file
    python bench/repack.py FILE.gguf ...        # e.g. a q4_0 file written by lorakit-export
    python bench/repack.py --rounds 5 --new 64

lorakit turns llama.cpp's extra buffer types off (`use_extra_bufts = False`) on every CPU, because the repacked kernels
crash on Intel CPUs with AMX (05a_gguf). This prints what that costs on this machine: greedy tokens a second with it off
and on, each configuration in turn for `--rounds` rounds, medians and their ratio, one thread each (llama.cpp's own
default, half the cores, on a 2-core machine), with the buffer types llama.cpp reports. It also prints how often the two
agree with lorakit's own reading of the file (`Llama.from_gguf`) on the next token at every position of the prompt.
On a CPU whose repacked kernels crash, the 'on' rows say so in a line instead.
"""
import argparse, re, statistics, time
from pathlib import Path
import torch
from lorakit.gguf import LlamaCpp, smollm2_gguf
from lorakit.model import Llama
import lorakit.checkpoint  # Llama.from_gguf (05d)

PROMPT = '<|im_start|>user\nExplain recursion in Python, with an example.<|im_end|>\n<|im_start|>assistant\n'

def one(path:Path, repack:bool, n_new:int, ref:torch.Tensor|None)->dict:
    "Tokens a second of one greedy run, the buffer types, and top-1 agreement with lorakit's logits."
    with LlamaCpp(path, repack=repack, verbose=True, n_ctx=256) as cpp:
        ids = cpp.tokenize(PROMPT)
        cpp.greedy(ids, 2)  # warm
        t = time.perf_counter()
        new = cpp.greedy(ids, n_new)
        rate = len(new) / (time.perf_counter() - t)
        bufs = sorted(set(re.findall(r'(\S+) model buffer size', cpp.log())))
        agree = None
        if ref is not None:
            agree = (cpp.logits(ids).argmax(-1) == ref.argmax(-1)).float().mean().item()
    return dict(rate=rate, bufs=bufs, agree=agree)

def lorakit_logits(path:Path)->torch.Tensor:
    "lorakit's logits at every position of the prompt, as llama.cpp tokenizes it."
    with LlamaCpp(path) as cpp: ids = cpp.tokenize(PROMPT)
    m = Llama.from_gguf(path, dtype='float32', device='cpu').eval()
    with torch.no_grad(): return m(torch.tensor([ids]))[0]

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('files', nargs='*', type=Path)
    ap.add_argument('--rounds', type=int, default=3)
    ap.add_argument('--new', type=int, default=64, help='greedy tokens a run')
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = []
    for f in a.files or [smollm2_gguf()]:
        ref = lorakit_logits(f)
        got = {False: [], True: []}
        for _ in range(a.rounds):
            for repack in (False, True):
                try: got[repack].append(one(f, repack, a.new, ref))
                except RuntimeError as e: got[repack].append(dict(error=str(e)))
        rows.append((f, got))
    print(f"\n| file | repack | tokens/s (median of {a.rounds}) | / off | top-1 = lorakit | buffers |")
    print("|---|---|---:|---:|---:|---|")
    for f, got in rows:
        off = statistics.median(r['rate'] for r in got[False] if 'rate' in r)
        for repack in (False, True):
            ok = [r for r in got[repack] if 'rate' in r]
            if not ok:
                print(f"| {f.name} | {'on' if repack else 'off'} | – | – | – | {got[repack][0]['error']} |")
                continue
            rate = statistics.median(r['rate'] for r in ok)
            print(f"| {f.name} | {'on' if repack else 'off'} | {rate:.1f} | {rate / off:.2f} | "
                  f"{ok[0]['agree']:.2f} | {' '.join(ok[0]['bufs'])} |")

if __name__ == '__main__': main()
