#!/usr/bin/env python
"""Execute the notebooks and commit-ready save their outputs, or check that the committed ones were executed.

    python tools/run_nbs.py                        # run every notebook, save its outputs, clean it, record it
    python tools/run_nbs.py nbs/07_train.ipynb     # only these
    python tools/run_nbs.py --check                # CI: every notebook executed as committed, no error outputs

The notebooks are committed with their outputs, so that a reader on GitHub sees the tables, plots and messages the
prose talks about. A run goes through `nbdev-test --save`, so cells flagged `cuda`, `slow` and the rest are skipped
as in the tests, and a notebook is written back only if every cell succeeded. `nbs/.executed.json` records, for each
notebook, a hash of its code and which cells gave output; temporary directories, process ids and the paths of the
clone and of site-packages are written the same way at every run, and a log line bitsandbytes prints only on some CPUs
is dropped, so that a re-run changes few lines; `--check` compares the notebooks against it, so a notebook
edited and not run again, or committed with its outputs cleared, is named.
"""
import argparse, hashlib, json, os, re, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS, RECORD = ROOT/'nbs', ROOT/'nbs'/'.executed.json'

def all_nbs()->list:
    from nbdev.doclinks import nbglob
    return sorted(Path(p).resolve() for p in nbglob(NBS))

def code_cells(nb:dict)->list: return [c for c in nb['cells'] if c['cell_type'] == 'code']

# directives that change how the docs site shows a cell, never what it computes (tools/build_docs.py)
_SHOWN_ONLY = re.compile(r'^#\|\s*(proof|result)\s*\n?', re.M)

def src_hash(nb:dict)->str:
    "What the outputs depend on in the notebook itself: its code, cell by cell, less the site's `#| proof` and `#| result`."
    return hashlib.sha256(json.dumps([_SHOWN_ONLY.sub('', ''.join(c['source'])) for c in code_cells(nb)]).encode()).hexdigest()[:16]

def record_of(nb:dict)->dict:
    return {'code': src_hash(nb), 'with_output': [i for i, c in enumerate(code_cells(nb)) if c.get('outputs')]}

# a warning as Python's warnings module prints it ("file.py:12: FutureWarning: ..."), or as a logger names it
_WARNING = re.compile(r'^.*\b(\w*Warning|WARNING)\b:.*$', re.M)

def errors(nb:dict)->list:
    "Outputs a reader should never see: exceptions, tracebacks on stderr, and library warnings."
    out = []
    for i, c in enumerate(code_cells(nb)):
        for o in c.get('outputs', []):
            if o['output_type'] == 'error': out.append(f"code cell {i} holds an error output: {o.get('ename')}: {o.get('evalue', '')[:80]}")
            elif o['output_type'] == 'stream' and 'Traceback (most recent call last)' in ''.join(o.get('text', '')):
                out.append(f'code cell {i} printed a traceback')
            elif o['output_type'] == 'stream' and (w := _WARNING.search(''.join(o.get('text', '')))):
                out.append(f'code cell {i} shows a library warning: {w.group(0)[:80]}')
    return out

def check()->list:
    rec = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    problems = []
    for p in all_nbs():
        rel, nb = p.relative_to(ROOT).as_posix(), json.loads(p.read_text())
        fix = f'run python tools/run_nbs.py {rel} and commit it'
        r = rec.get(p.name)
        if r is None: problems.append(f'{rel} was never executed with tools/run_nbs.py: {fix}'); continue
        if r['code'] != src_hash(nb): problems.append(f'{rel} changed since it was executed: {fix}'); continue
        cells = code_cells(nb)
        lost = [i for i in r['with_output'] if not cells[i].get('outputs')]
        if lost: problems.append(f'{rel}: code cells {lost} gave output when run, but none is committed: {fix}')
        problems += [f'{rel}: {e}' for e in errors(nb)]
    return problems

# Names that change at every run or from machine to machine, as they appear in outputs, and what a reader sees instead
_UNSTABLE = [(re.compile(r'/tmp/tmp[A-Za-z0-9_]{8}'), '/tmp/tmpdir'),  # tempfile.mkdtemp's random names
             (re.compile(r'[^\s\'"(]*/site-packages/'), '.../site-packages/'),  # where this Python's packages are installed
             (re.compile(re.escape(str(ROOT)) + '/'), ''),  # where this clone is
             (re.compile(r'\(pid: \d+\)'), '(pid: ...)')]  # process ids, in torchrun's reports

# Lines a dependency logs to stderr on some machines and not others, about the machine rather than the notebook
_NOISE = re.compile(r'^Failed to load CPU gemm_4bit_forward from kernels-community.*\n?', re.M)  # bitsandbytes, on CPUs with AVX512-BF16

def stabilise(p:Path):
    "Rewrite the unstable names in the text outputs of the notebook at `p`, and drop machine-dependent log lines."
    nb = json.loads(p.read_text())
    def fix(t): 
        for rx, to in _UNSTABLE: t = rx.sub(to, t)
        return t
    for c in code_cells(nb):
        for o in c.get('outputs', []):
            if o['output_type'] == 'stream' and o['name'] == 'stderr': o['text'] = _NOISE.sub('', ''.join(o['text'])).splitlines(keepends=True)
        c['outputs'] = [o for o in c.get('outputs', []) if not (o['output_type'] == 'stream' and not ''.join(o['text']).strip())]
        for o in c['outputs']:
            if 'text' in o: o['text'] = [fix(l) for l in o['text']]
            for k in ('text/plain', 'text/markdown', 'text/html'):
                if k in o.get('data', {}): o['data'][k] = [fix(l) for l in o['data'][k]]
    tmp = p.with_name(p.name + '.tmp'); tmp.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n'); tmp.replace(p)  # never half a notebook

def run(paths:list):
    # no progress bars from transformers or tqdm: they hold this machine's speed, and they'd change at every run
    env = dict(os.environ, PYTHONHASHSEED='0', MPLBACKEND='Agg', HF_HUB_DISABLE_PROGRESS_BARS='1', TQDM_DISABLE='1')
    failed = []
    for p in paths:  # one at a time: each notebook uses every core through torch
        print(f'run_nbs: {p.relative_to(ROOT)}', flush=True)
        if subprocess.run(['nbdev-test', str(p), '--save'], cwd=ROOT, env=env).returncode: failed.append(p.name)
    for p in paths:
        if p.name not in failed: stabilise(p)
    subprocess.run(['nbdev-clean'], cwd=ROOT, check=True)
    rec = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    for p in paths:  # nbdev-test writes a notebook back only if all of it ran: a failed one keeps its old outputs and record
        if p.name not in failed: rec[p.name] = record_of(json.loads(p.read_text()))
    rec = {k: rec[k] for k in sorted(rec) if (NBS/k).exists()}
    tmp = RECORD.with_suffix('.tmp'); tmp.write_text(json.dumps(rec, indent=1) + '\n'); tmp.replace(RECORD)
    if failed: sys.exit(f'run_nbs: {", ".join(failed)} failed; their outputs were not saved')
    print(f'run_nbs: executed and saved {len(paths)} notebook(s); recorded in {RECORD.relative_to(ROOT)}')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('notebooks', nargs='*', type=Path)
    ap.add_argument('--check', action='store_true', help='check the committed notebooks instead of running them')
    a = ap.parse_args()
    if a.check:
        problems = check()
        for p in problems: print('run_nbs:', p)
        print(f'run_nbs: {len(all_nbs())} notebooks, ' + (f'{len(problems)} problems' if problems else 'all executed, no error outputs'))
        sys.exit(1 if problems else 0)
    paths = [p.resolve() for p in a.notebooks] or all_nbs()
    missing = [str(p) for p in paths if not p.exists()]
    if missing: sys.exit(f'run_nbs: no such notebook: {", ".join(missing)}')
    run(paths)
