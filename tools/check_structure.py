#!/usr/bin/env python
"""The package's shape, measured: who reads `TrainConfig`, how long the model file, cells and lines are.

    python tools/check_structure.py           # prints each offence; exit 1 if there is one
    python tools/check_structure.py --report  # the figures, offences or not

Four limits, each a promise of the code's layout:
- `TrainConfig`'s fields are read in at most 3 modules: `train` (the class, its checks and
  `resolve`, which turns it into the `Plan` a run uses), `nudge` (which proposes new settings) and
  `cli` (its flags). A read is `cfg.<field>`, `<x>.cfg.<field>`, `getattr(cfg, ...)` or
  `asdict(cfg)`; `cfg` is a `TrainConfig` everywhere (STYLE.md), so its name finds it.
- `lorakit/model.py` holds at most 500 lines: a decoder read in one sitting.
- No `#| export` cell of a notebook is over 40 lines, but one: the training loop, `07_train`'s
  `fit`, which reads top to bottom in one function as nanoGPT's and torchtune's do (STYLE.md).
- No line of `lorakit/*.py` is over 100 characters (nbdev's generated `_modidx.py` and `__all__`
  lists aside).
"""
import ast, json, re, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
READERS = {'train', 'nudge', 'cli'}  # the modules allowed to read a TrainConfig's fields
MODEL_LINES, CELL_LINES, LINE_CHARS = 500, 40, 100
LOOP = ('07_train.ipynb', 'def fit(')  # the one export cell allowed to be longer: the loop

def config_fields()->set[str]:
    "The names of `TrainConfig`'s fields, read from the dataclasses in lorakit/train.py."
    tree = ast.parse((ROOT/'lorakit/train.py').read_text())
    names = set()
    for n in tree.body:
        if isinstance(n, ast.ClassDef) and n.name.endswith('Settings'):
            names |= {s.target.id for s in n.body if isinstance(s, ast.AnnAssign)}
    return names

def _is_cfg(n:ast.expr)->bool:
    "Whether `n` is `cfg` or `<something>.cfg`."
    return (isinstance(n, ast.Name) and n.id == 'cfg') or (isinstance(n, ast.Attribute)
                                                          and n.attr == 'cfg')

def _aliases(tree:ast.AST)->set[str]:
    "Other names a `TrainConfig` goes by in `tree`: `c = self.cfg`, or a parameter `c:TrainConfig`."
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.arg) and n.annotation is not None and 'TrainConfig' in ast.unparse(
                n.annotation) and 'Plan' not in ast.unparse(n.annotation):
            names.add(n.arg)
        if not isinstance(n, ast.Assign): continue
        for t in n.targets:
            pairs = (zip(t.elts, n.value.elts) if isinstance(t, ast.Tuple)
                     and isinstance(n.value, ast.Tuple) else [(t, n.value)])
            names |= {a.id for a, v in pairs if isinstance(a, ast.Name) and _is_cfg(v)}
    return names

def config_reads(path:Path, fields:set)->list[int]:
    "The line of each read of a `TrainConfig` field in `path`."
    tree, lines = ast.parse(path.read_text()), []
    names = _aliases(tree) | {'cfg'}
    is_cfg = lambda n: _is_cfg(n) or isinstance(n, ast.Name) and n.id in names
    for n in ast.walk(tree):
        if isinstance(n, ast.Attribute) and n.attr in fields and is_cfg(n.value):
            lines.append(n.lineno)
        elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
              and n.func.id in ('getattr', 'asdict', 'vars') and n.args and is_cfg(n.args[0])):
            lines.append(n.lineno)
    return lines

def export_cells(nb:Path)->list[tuple[int, int]]:
    "(cell index, lines) of each `#| export` cell of `nb`, the loop's aside."
    cells = [(c['cell_type'], ''.join(c['source'])) for c in json.loads(nb.read_text())['cells']]
    return [(i, len(s.splitlines())) for i, (kind, s) in enumerate(cells)
            if kind == 'code' and re.match(r'\s*#\|\s*export', s)
            and not (nb.name == LOOP[0] and LOOP[1] in s)]

def long_lines(path:Path)->list[tuple[int, int]]:
    "(line number, length) of each line over `LINE_CHARS` in `path`, its `__all__` list aside."
    out, in_all = [], False
    for i, l in enumerate(path.read_text().splitlines(), 1):
        in_all = l.startswith('__all__') or (in_all and l.startswith(' '))
        if len(l) > LINE_CHARS and not in_all: out.append((i, len(l)))
    return out

def main(report:bool=False)->int:
    fields, bad = config_fields(), []
    mods = sorted(p for p in (ROOT/'lorakit').glob('*.py') if p.name != '_modidx.py')
    reads = {p.stem: r for p in mods if (r := config_reads(p, fields))}
    if report:
        print(f"TrainConfig fields read in {len(reads)} modules, {sum(map(len, reads.values()))} "
              f"times: " + ', '.join(f"{k} {len(v)}" for k, v in sorted(reads.items())))
    bad += [f"lorakit/{m}.py:{r[0]}: reads TrainConfig's fields ({len(r)} times); only "
            f"{', '.join(sorted(READERS))} may: read the run's `Plan` (train.resolve) instead"
            for m, r in reads.items() if m not in READERS]
    n = len((ROOT/'lorakit/model.py').read_text().splitlines())
    if report: print(f"lorakit/model.py: {n} lines")
    if n > MODEL_LINES: bad.append(f"lorakit/model.py has {n} lines, over {MODEL_LINES}")
    cells = [(nb.name, i, k) for nb in sorted((ROOT/'nbs').glob('*.ipynb'))
             for i, k in export_cells(nb)]
    big = [c for c in cells if c[2] > CELL_LINES]
    if report:
        ks = sorted(k for *_, k in cells)
        print(f"export cells: {len(ks)}, median {ks[len(ks)//2]} lines, {len(big)} over "
              f"{CELL_LINES}")
    bad += [f"nbs/{nb} cell {i}: an export cell of {k} lines, over {CELL_LINES}: split it"
            for nb, i, k in big]
    longs = [(p.name, i, k) for p in mods for i, k in long_lines(p)]
    if report: print(f"lines over {LINE_CHARS} characters in lorakit/: {len(longs)}")
    bad += [f"lorakit/{f}:{i}: {k} characters, over {LINE_CHARS}" for f, i, k in longs]
    for b in bad: print(b)
    return 1 if bad else 0

if __name__ == '__main__': sys.exit(main('--report' in sys.argv))
