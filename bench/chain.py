#!/usr/bin/env python
"""SFT, then DPO from the SFT adapter, on SmolLM2-135M-Instruct (QLoRA): `lorakit-train --init-adapter`, end to end.

    python bench/chain.py --out /tmp/chain                       # 30 SFT steps, then 20 DPO steps three ways
    python bench/chain.py --out /tmp/chain --sft-steps 60 --dpo-steps 40

Stage 1 is 13_sft's instruction tuning: 06b_instruct's `pydoc_chats` (a question per topic of Python's docs, answered
by the topic's opening) as conversations, the loss on the assistant's tokens. Stage 2 is DPO on 06c_prefs'
`pydoc_prefs` (the topic's answer chosen, another topic's rejected), run three ways with the same data, steps and seed:
from the SFT adapter with the reference its frozen copy (`--ref init`, TRL's choice), from the SFT adapter with the
bare base as the reference (`--ref base`), and from a fresh adapter. An OUT/sft left by an earlier run of this script is
used again (delete it to train SFT anew). Each `lorakit-train` runs in a subprocess and
prints its held-out figures before and after; this script gathers them into one table. The two stages split their
data apart on their own (SFT by topic, DPO a seeded tenth of the pairs), so a held-out pair's topic may have been an
SFT training question.
"""
import argparse, json, re, subprocess, sys, time
from pathlib import Path

def run(args:list, log:Path)->tuple[dict, float]:
    "Run lorakit-train with `args`; its 'before:' and 'after:' figures, and the seconds it took."
    t = time.perf_counter()
    exe = Path(sys.executable).parent/'lorakit-train'  # the console script beside this Python
    p = subprocess.run([str(exe), *args], capture_output=True, text=True)
    log.write_text(p.stdout + p.stderr)
    if p.returncode: sys.exit(f"lorakit-train {' '.join(args)} failed:\n{p.stderr[-2000:]}")
    said = {w: next(l for l in p.stdout.splitlines() if l.startswith(w + ':')) for w in ('before', 'after')}
    return said, time.perf_counter() - t

def figures(line:str)->dict:
    "The named numbers of a 'before:'/'after:' line: 'valid loss 1.234 over 8 rows, reward accuracy 0.5'."
    return {k: float(v) for k, v in re.findall(r'([a-z][a-z -]*?) (-?\d+\.\d+)', line)}

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--out', required=True); p.add_argument('--sft-steps', type=int, default=30)
    p.add_argument('--dpo-steps', type=int, default=20); p.add_argument('--sft-lr', type=float, default=1e-3)
    p.add_argument('--dpo-lr', type=float, default=2e-4); p.add_argument('--beta', type=float, default=0.1)
    a = p.parse_args()
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.instruct import pydoc_chats
    from lorakit.prefs import pydoc_prefs, write_prefs
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    ck = str(smollm2_checkpoint())
    chats = out/'chats.jsonl'
    chats.write_text(''.join(json.dumps(dict(messages=c.messages)) + '\n' for c in pydoc_chats()))
    prefs = write_prefs(pydoc_prefs(), out/'prefs.jsonl', overwrite=True)
    common = ['--model', ck, '--quant', 'nf4', '--dtype', 'float32', '--samples', '0', '--overwrite']
    rows = []
    sft = ['--data', str(chats), '--chat', 'on', '--steps', str(a.sft_steps), '--bs', '4', '--seq-len', '256',
           '--lr', str(a.sft_lr), '--r', '16', '--alpha', '32', '--dropout', '0', '--out', str(out/'sft')]
    if (out/'sft'/'adapter'/'adapter_config.json').is_file() and (out/'sft.log').is_file():  # kept
        log = (out/'sft.log').read_text().splitlines()
        said = {w: next(l for l in log if l.startswith(w + ':')) for w in ('before', 'after')}
        rows.append(('SFT (pydoc chats), from an earlier run of this script', said, float('nan')))
    else:
        said, sec = run(common + sft, out/'sft.log')
        rows.append(('SFT (pydoc chats)', said, sec))
    dpo = ['--data', str(prefs), '--steps', str(a.dpo_steps), '--bs', '2', '--seq-len', '512',
           '--lr', str(a.dpo_lr), '--beta', str(a.beta), '--dropout', '0']
    for name, extra in [('DPO from SFT, ref = SFT adapter', ['--init-adapter', str(out/'sft'/'adapter')]),
                        ('DPO from SFT, ref = base', ['--init-adapter', str(out/'sft'/'adapter'), '--ref', 'base']),
                        ('DPO from a fresh adapter', ['--r', '16', '--alpha', '32'])]:
        d = out/re.sub(r'\W+', '-', name.lower()).strip('-')
        said, sec = run(common + dpo + extra + ['--out', str(d)], d.with_suffix('.log'))
        rows.append((name, said, sec))
    print(f"SmolLM2-135M-Instruct, QLoRA (NF4, float32), {a.sft_steps} SFT steps (4 x 256, lr {a.sft_lr}, r 16), "
          f"then {a.dpo_steps} DPO steps (2 pairs x 512, lr {a.dpo_lr}, beta {a.beta}); held-out figures\n")
    print("| stage | held-out before | held-out after | seconds |\n|---|---|---|---:|")
    for name, said, sec in rows:
        b, f = (', '.join(f'{k} {v:.3f}' for k, v in figures(said[w]).items()) for w in ('before', 'after'))
        print(f"| {name} | {b} | {f} | {sec:.0f} |")

if __name__ == '__main__': main()
