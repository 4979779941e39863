#!/usr/bin/env python
"""No module imports another's private name: lorakit/*.py and bench/*.py, read with `ast`.

    python tools/check_private.py          # prints each offender; exit 1 if there is one

A name that starts with one underscore is its module's own (dunders such as `__version__` are
public). Another module may not import it, in any of the ways Python allows:
`from lorakit.train import _x`, `from .train import _x`, `from _common import _x` (a sibling in
bench/), or `import lorakit.train as t` and then `t._x`. A module that needs such a name is asking
for a public function with a name and a docstring, or for the code to move to where it is used.
"""
import ast, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIRS = ('lorakit', 'bench')

def _private(name:str)->bool: return name.startswith('_') and not name.startswith('__')

def _ours(module:str|None, level:int, siblings:set)->bool:
    "Whether `from module import ...` (with `level` dots) names a module of this project."
    if level: return True
    top = (module or '').split('.')[0]
    return top == 'lorakit' or top in siblings

def _module_names(tree:ast.AST, siblings:set)->set[str]:
    "The names `tree` binds to a module of this project: `import lorakit.x as m`, `from . import x`."
    names = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Import):
            for a in n.names:
                if a.name.split('.')[0] == 'lorakit' or a.name in siblings:
                    names.add(a.asname or a.name.split('.')[0])
        elif isinstance(n, ast.ImportFrom) and (n.module == 'lorakit' or n.level and not n.module):
            names |= {a.asname or a.name for a in n.names}
    return names

def _root(n:ast.expr)->str|None:
    "The name an attribute chain starts from: 'm' for `m.x.y`."
    while isinstance(n, ast.Attribute): n = n.value
    return n.id if isinstance(n, ast.Name) else None

def offenders(path:Path)->list[str]:
    "'file:line: what' for each private name of another module that `path` imports or reads."
    tree, rel = ast.parse(path.read_text(), str(path)), path.relative_to(ROOT)
    siblings = {p.stem for p in path.parent.glob('*.py')} - {path.stem}
    modules, found = _module_names(tree, siblings), []
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and _ours(n.module, n.level, siblings):
            mod = '.'*n.level + (n.module or '')
            found += [f"{rel}:{n.lineno}: from {mod} import {a.name}"
                      for a in n.names if _private(a.name)]
        elif isinstance(n, ast.Attribute) and _private(n.attr) and _root(n.value) in modules:
            found.append(f"{rel}:{n.lineno}: {ast.unparse(n)}")
    return sorted(found, key=lambda o: int(o.split(':')[1]))

def main()->int:
    files = sorted(f for d in DIRS for f in (ROOT/d).glob('*.py'))
    bad = [o for f in files for o in offenders(f)]
    for o in bad: print(o)
    print(f"check_private: {len(bad)} imports of another module's private name in {len(files)} "
          f"files of {' and '.join(d + '/' for d in DIRS)}" + (": give each a public name, or move it" if bad else ''))
    return 1 if bad else 0

if __name__ == '__main__': sys.exit(main())
