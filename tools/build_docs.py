#!/usr/bin/env python
"""Build lorakit's docs site into `_site/`, offline, from the executed notebooks and the package's docments.

    pip install -e ".[docs]"
    python tools/build_docs.py          # then open _site/index.html through a server: python -m http.server -d _site

nbdev's own docs need Quarto, which can't be installed from the package registries, so the site is built with
Material for MkDocs, and mkdocs-jupyter renders each notebook with the outputs committed in it. The README is the
landing page, each notebook is a page, in parts (PARTS, below), and every exported symbol is documented twice: right
after the cell that defines it, as nbdev's `show_doc` places it, and on its module's API page, which search indexes.
A notebook page opens with its intro and then its result (the cell marked `#| result`), and folds what proves rather
than teaches (checks, `#| proof` cells, `<!-- fold -->` sections, long code), so a reader can finish it.
"""
import argparse, ast, html, inspect, json, importlib, os, re, shutil, subprocess, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NBS, SITE = ROOT/'nbs', ROOT/'_site'
IMAGES = NBS/'images'  # pictures that notebooks' markdown shows as images/NAME; the site has them in images/
REPO = 'https://github.com/lorakit/lorakit/blob/main'

def directives(src:str)->dict:
    "`#| name args` lines of a cell's source, as {name: args}."
    return {l[2:].split()[0]: ' '.join(l[2:].split()[1:]) for l in src.splitlines() if l.startswith('#|') and l[2:].split()}

def strip_directives(src:str)->str: return '\n'.join(l for l in src.splitlines() if not l.startswith('#|')).strip()

def notebooks(only:list=None)->list:
    "The notebooks in reading order, as nbdev-test finds them, without the index (the README is the landing page); `only` these stems if given."
    from nbdev.doclinks import nbglob
    return sorted(Path(p) for p in nbglob(NBS) if Path(p).name != 'index.ipynb' and (not only or Path(p).stem in only))

# The site's navigation in parts, each notebook in one; a part's notebooks keep their numbers, so reading order shows.
PARTS = {'LoRA and QLoRA': ['00_core', '01_lora', '02_inject', '03_nf4', '04_qlora', '04a_lowbit', '04b_fuse', '04c_gemv'],
         'Model and data': ['05_model', '05b_objective', '06_data', '06a_pretrain', '06b_instruct', '06c_prefs'],
         'Training': ['07_train', '07a_run', '11_fsdp'],
         'Shipping': ['08_adapters', '08a_export', '08b_ollama', '08c_named'],
         'Debugging and memory': ['09_instrument', '10_memory'],
         'Tuning': ['12_nudge', '12a_panel'],
         'Recipes': ['13_sft', '13a_gemma3', '14_dpo', '15_grpo'],
         'The job and the commands': ['98_finetune', '99_cli'],
         'Reference: formats and families': ['05a_gguf', '05c_families', '05d_checkpoint']}

def part_of(stem:str)->str:
    "The part of the site a notebook is read in."
    part = next((k for k, v in PARTS.items() if stem in v), None)
    if part is None: sys.exit(f'build_docs: {stem} is in no part of the site: add it to PARTS in tools/build_docs.py')
    return part

def title(nb:dict, fallback:str)->str:
    for c in nb['cells']:
        src = ''.join(c['source'])
        if c['cell_type'] == 'markdown' and src.startswith('# '): return src.splitlines()[0][2:].strip()
    return fallback

# ---- show_doc, rendered to markdown from docments ----
class _Named:
    "A default shown by its name: `loss_fn=cross_entropy`, not `<function cross_entropy at 0x7fb4...>`."
    def __init__(self, name:str): self.name = name
    def __repr__(self): return self.name

def _shown(v):
    "A parameter's default as the docs show it: no memory address, which differs from build to build."
    if v is inspect.Parameter.empty: return v
    if inspect.isfunction(v) or inspect.isclass(v) or inspect.isbuiltin(v): return _Named(v.__qualname__)
    return _Named(f'{type(v).__qualname__}()') if re.search(r' at 0x[0-9a-f]+>$', repr(v)) else v

def _fmt(v)->str: return '' if v is inspect.Parameter.empty else f'`{_shown(v)!r}`'

def _unquote(s:str)->str:
    "Annotations as written: the modules use `from __future__ import annotations`, so they are strings (ForwardRefs in a NamedTuple)."
    s = re.sub(r"""ForwardRef\((['"])(.*?)\1(?:, module=[^)]*)?\)""", r'\2', s)
    return re.sub(r'''(: |-> )(['"])(.*?)\2(?=[,)=\s]|$)''', r'\1\3', s)

def _anno(a)->str:
    if a is inspect.Parameter.empty or a is None: return ''
    return a.__name__ if isinstance(a, type) else _unquote(str(a).replace('typing.', ''))

SIG_WIDTH = 100  # the project's longest line of code: a longer signature gets a line per parameter

def signature_md(kind:str, name:str, sig)->str:
    "`def name(...)->...:` as Python prints it, on one line if it fits in `SIG_WIDTH`, else one parameter a line."
    P, ps, out = inspect.Parameter, list(sig.parameters.values()), []
    for i, p in enumerate(ps):  # the `*` and `/` markers, as `inspect.Signature.__str__` places them
        if p.kind == P.KEYWORD_ONLY and (i == 0 or ps[i-1].kind not in (P.KEYWORD_ONLY, P.VAR_POSITIONAL)): out.append('*')
        out.append(_unquote(str(p.replace(default=_shown(p.default)))))
        if p.kind == P.POSITIONAL_ONLY and (i+1 == len(ps) or ps[i+1].kind != P.POSITIONAL_ONLY): out.append('/')
    ret = '' if sig.return_annotation is sig.empty else _unquote(f' -> {inspect.formatannotation(sig.return_annotation)}')
    end = ret + (':' if kind == 'def' else '')
    one = f'{kind} {name}({", ".join(out)}){end}'
    return one if len(one) <= SIG_WIDTH else '\n'.join([f'{kind} {name}('] + [f'    {a},' for a in out] + [f'){end}'])

def own_doc(obj, cls=None)->str|None:
    "The docstring of `obj`, or of the method it overrides in a lorakit class: never torch's text for `forward`."
    if obj.__doc__: return inspect.cleandoc(obj.__doc__)
    for base in (cls.__mro__[1:] if cls is not None else ()):
        f = vars(base).get(obj.__name__)
        f = getattr(f, '__func__', f)
        if getattr(f, '__doc__', None): return inspect.cleandoc(f.__doc__) if base.__module__.startswith('lorakit') else None
    return None

def _cell(s:str)->str: return s.replace('|', '\\|').replace('\n', ' ')

def show_doc_md(obj, name:str, level:int=3, cls=None, fold:bool=False)->str:
    "Markdown for one symbol (a method of `cls`): heading with a source link, signature, docstring, and a table of its docments (folded if `fold`)."
    from fastcore.docments import docments
    obj = getattr(obj, '_init_fn', obj) if type(obj).__name__ == 'CustomOpDef' else obj  # torch.library.custom_op
    kind = 'class' if inspect.isclass(obj) else 'def'
    src = obj if inspect.isclass(obj) else inspect.unwrap(obj)  # a decorated function's own lines, not its wrapper's
    try: src_file, line = inspect.getsourcefile(src), inspect.getsourcelines(src)[1]
    except (TypeError, OSError): src_file, line = None, None
    link = f'<small>[source]({REPO}/{Path(src_file).relative_to(ROOT).as_posix()}#L{line})</small>' if src_file and Path(src_file).is_relative_to(ROOT) else ''
    f = obj.__init__ if kind == 'class' and '__init__' in vars(obj) else obj
    try: sig = inspect.signature(f)
    except (TypeError, ValueError): sig = None
    out = [f"{'#'*level} {name}", ''] + ([link, ''] if link else [])
    if sig is not None:
        if kind == 'class': sig = sig.replace(parameters=[p for p in sig.parameters.values() if p.name != 'self'])
        out += ['```python', signature_md(kind, name, sig), '```', '']
    doc = own_doc(obj, cls)
    if doc: out += [doc, '']
    try: dm = docments(f, full=True) if sig is not None else {}
    except Exception: dm = {}
    # the types as declared: docments fills an unannotated parameter's with its default's (`NoneType` for None)
    declared = {k: p.annotation for k, p in sig.parameters.items()} if sig is not None else {}
    rows = [(k, v, declared.get(k, inspect.Parameter.empty)) for k, v in dm.items() if k not in ('self', 'return')]
    rows = [(k, v, a) for k, v, a in rows if v.get('docment') or a is not inspect.Parameter.empty]
    if rows:
        if fold: out += [f'<details class="lk-params"><summary>{len(rows)} parameter{"s"[:len(rows)>1]}</summary>', '']
        out += ['| | Type | Default | Details |', '|---|---|---|---|']
        out += [f"| **{k}** | {_cell(_anno(a))} | {_cell(_fmt(v['default']))} | {_cell(v.get('docment') or '')} |" for k, v, a in rows]
        ret = dm.get('return', {})
        if ret and (ret.get('docment') or ret.get('anno') not in (inspect.Parameter.empty, None)):
            out += [f"| **Returns** | {_cell(_anno(ret['anno']))} | | {_cell(ret.get('docment') or '')} |"]
        out += [''] + (['</details>', ''] if fold else [])
    return '\n'.join(out)

def _deco_name(d)->str:
    "`patch` for `@patch`, `@patch(as_prop=True)` and `@fastcore.basics.patch`."
    d = d.func if isinstance(d, ast.Call) else d
    return d.attr if isinstance(d, ast.Attribute) else getattr(d, 'id', '')

def patched_classes(n)->list:
    "The classes a `@patch` def adds itself to, from its first parameter's annotation (`A`, `(A,B)`, `A|B`); [] if not patched."
    if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) or 'patch' not in map(_deco_name, n.decorator_list): return []
    a = (n.args.posonlyargs + n.args.args)[0].annotation if n.args.posonlyargs + n.args.args else None
    parts = a.elts if isinstance(a, ast.Tuple) else [a]
    while any(isinstance(x, ast.BinOp) for x in parts):  # A|B|C
        parts = [y for x in parts for y in ((x.left, x.right) if isinstance(x, ast.BinOp) else (x,))]
    return [x.value if isinstance(x, ast.Constant) else ast.unparse(x) for x in parts if x is not None]

def exported_names(src:str)->list:
    "Public functions and classes a cell defines, in order; a `@patch` method as `Class.method`, never as the bare name."
    try: tree = ast.parse(strip_directives(src))
    except SyntaxError: return []
    out = []
    for n in tree.body:
        if not isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) or n.name.startswith('_'): continue
        cls = patched_classes(n)
        out += [f'{c}.{n.name}' for c in cls if not c.startswith('_')] if cls else [n.name]
    return out

def _func(v):
    "The function behind a class attribute: a property's getter, a classmethod's or staticmethod's function."
    if isinstance(v, property): return v.fget
    if type(v).__name__ == '_clsmethod': return v.f  # fastcore's, from `@patch(cls_method=True)`
    return v.__func__ if isinstance(v, (staticmethod, classmethod)) else v

def resolve(mod, name:str)->tuple:
    "(object, class) that a documented name stands for in `mod`: a function or class, or `Class.method` as the class holds it."
    cls_name, _, m = name.rpartition('.')
    if not cls_name: return getattr(mod, name, None), None
    cls = getattr(mod, cls_name, None)
    return (_func(vars(cls).get(m)), cls) if inspect.isclass(cls) else (None, None)

def methods_md(cls, name:str, fold:bool=False)->str:
    "Public methods the class defines itself, with docstrings of lorakit's own."
    parts = []
    for k, v in vars(cls).items():
        if k.startswith('_') or not (inspect.isfunction(v) or isinstance(v, (staticmethod, classmethod))): continue
        fn = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v
        if own_doc(fn, cls): parts.append(show_doc_md(fn, f'{name}.{k}', level=4, cls=cls, fold=fold))
    if fold and parts:  # on a notebook page: one line to open; the API page shows them all
        parts = [f'<details class="lk-params"><summary>{len(parts)} method{"s"[:len(parts)>1]}</summary>', ''] + parts + ['</details>', '']
    return '\n'.join(parts)

# ---- the pages ----
# How a notebook page reads: its intro, then its result, then the lesson. Two directives change how the site shows a
# cell and never what it computes (tools/run_nbs.py leaves them out of a notebook's code hash):
#   `#| result`  the cell whose output the notebook builds towards: the site shows a copy of it after the intro
#                (one per notebook; a markdown cell marks itself with a first line `<!-- result -->`);
#   `#| proof`   a cell that proves rather than teaches (a table of cases, a parity sweep): folded on the site;
#   `<!-- fold -->` as the first line of a heading's markdown cell: the section under it (to the next heading of its
#                level or above) is folded on the site below that cell, which says what the section holds.
# A cell that shows nothing and only checks (test_eq, assert) is folded too, and so is an exported cell longer than
# FOLD_LINES lines, under its first line: the docs that follow it give its signature and what it does.
SHOWN_ONLY = ('proof', 'result')
RESULT_MD = '<!-- result -->'
FOLD_LINES = 24
_CHECK = re.compile(r'^(test_\w+\(|assert\b|for .*:\s*(test_\w+\(|assert\b))', re.M)

def is_check(code:str)->bool:
    "Code that checks something at its top level: a test_* call or an assert (in a loop or not)."
    return bool(_CHECK.search(code))

def cell_tags(c:dict, d:dict)->list:
    "How the site shows one cell of a notebook: ['result'], ['proof'], ['fold'] or []."
    src = ''.join(c['source'])
    if c['cell_type'] == 'markdown': return ['result'] if src.startswith(RESULT_MD) else []
    code, exported = strip_directives(src), 'export' in d or 'exports' in d
    if 'result' in d: return ['result']
    if 'proof' in d or (not exported and not c.get('outputs') and is_check(code)): return ['proof']
    return ['fold'] if exported and len(code.splitlines()) > FOLD_LINES else []

FOLD_MD = '<!-- fold -->'
_HEADING = re.compile(r'^(#{1,6}) ', re.M)

def fold_sections(cells:list)->list:
    "`cells` with each cell of a folded section (below a `<!-- fold -->` heading) carrying the section's number in its id."
    k, level = 0, None
    for c in cells:
        src = ''.join(c['source'])
        doc = c.get('id', '').startswith('doc-')  # show_doc's own headings don't end a section
        h = _HEADING.match(src.removeprefix(FOLD_MD).lstrip()) if c['cell_type'] == 'markdown' and not doc else None
        if h and level is not None and len(h[1]) <= level: level = None  # the section ends
        if level is not None: c['id'] = f"lkfold-{k}-{c.get('id', '')}"
        if h and src.startswith(FOLD_MD): k, level = k + 1, len(h[1])
    return cells

def intro_end(cells:list)->int:
    "Where the intro ends: after the title and the first paragraph cell that follows it."
    md = [i for i, c in enumerate(cells) if c['cell_type'] == 'markdown']
    return (md[1] if len(md) > 1 and md[1] < next((i for i, c in enumerate(cells) if c['cell_type'] == 'code'), len(cells)) else md[0]) + 1

def result_first(cells:list, name:str, strict:bool=True)->list:
    "`cells` with a copy of the notebook's result after its intro, under a line that says where it comes from."
    res = [c for c in cells if 'result' in c['metadata'].get('tags', [])]
    if len(res) != 1:
        if not strict: return cells  # a draft: check_site names the page
        sys.exit(f'build_docs: {name} marks {len(res)} cells as its result; mark the one it builds towards '
                 f"with `#| result` (a markdown cell: a first line {RESULT_MD})")
    res[0]['id'] = 'lk-result'  # the lead's link: folded() puts the id on the cell
    copy = dict(res[0], id='lk-result-first', metadata={'tags': ['result-copy']})
    if copy['cell_type'] == 'markdown': copy['source'] = ''.join(copy['source']).replace(RESULT_MD, '', 1).strip()
    lead = {'cell_type': 'markdown', 'id': 'lk-result-lead', 'metadata': {},
            'source': '**The result.** What this notebook builds, as its [cell below](#lk-result) shows it:'}
    at = intro_end(cells)
    return cells[:at] + [lead, copy] + cells[at:]

def page_nb(nb_path:Path, mod, api_page:str, strict:bool=True)->dict:
    "A copy of the notebook for the site: `#| hide` cells out, directives out of the shown code, show_doc after each export, the result after the intro."
    nb = json.loads(nb_path.read_text())
    cells = []
    for c in nb['cells']:
        src = ''.join(c['source'])
        d = directives(src)
        if 'hide' in d or 'default_exp' in d and not strip_directives(src): continue
        tags = cell_tags(c, d)
        if c['cell_type'] == 'code':
            c = dict(c, source=strip_directives(src), execution_count=None)
            if not c['source'] and not c.get('outputs'): continue
        if c['cell_type'] == 'markdown': c = dict(c, source=tex_to_mathml(src).replace('](images/', '](../images/'))  # a page is a folder down
        cells.append(dict(c, metadata={'tags': tags} if tags else {}))
        if c['cell_type'] == 'code' and mod is not None and ('export' in d or 'exports' in d):
            for n in exported_names(src):
                obj, cls = resolve(mod, n)
                if obj is None: continue
                md = show_doc_md(obj, n, cls=cls, fold=True) + (methods_md(obj, n, fold=True) if inspect.isclass(obj) else '')
                cells.append({'cell_type': 'markdown', 'id': f"doc-{n.replace('.', '-')}", 'metadata': {}, 'source': md})
    cells = result_first(fold_sections(cells), nb_path.name, strict)
    if mod is not None:
        cells.append({'cell_type': 'markdown', 'id': 'api-link', 'metadata': {}, 'source': f'---\n\nEverything this notebook exports, on one page: [`{mod.__name__}`]({api_page}).'})  # a URL: mkdocs doesn't rewrite links in notebooks
    nb['cells'] = cells
    return nb

def page_api(mod, nb_name:str)->str:
    "One module's API: every public function and class in `__all__`, with methods."
    out = [f'# {mod.__name__}', '', (inspect.getdoc(mod) or '').split('\n\n')[0], '',
           f'Built, explained and tested in the notebook [{nb_name}](../{nb_name}.ipynb).', '']
    for n in getattr(mod, '__all__', []):
        obj = getattr(mod, n, None)
        if not (inspect.isfunction(obj) or inspect.isclass(obj)): continue
        out.append(show_doc_md(obj, n, level=2))
        if inspect.isclass(obj): out.append(methods_md(obj, n))
    return '\n'.join(out)

def readme_page()->str:
    "The README, its links to notebooks pointed at their pages, and links to other repository files at GitHub."
    txt = (ROOT/'README.md').read_text()
    txt = re.sub(r'^<!--.*?-->\n+', '', txt, flags=re.S)
    txt = re.sub(r'\]\(nbs/([^)]+\.ipynb)\)', r'](\1)', txt)
    return tex_to_mathml(re.sub(r'\]\((?!https?://|#|[^)]+\.ipynb\))([^)]+)\)', lambda m: f']({REPO}/{m[1]})', txt))

# ---- a mkdocs hook (mkdocs.yml names this file): each notebook page's contents, from the page's own headings ----
# mkdocs-jupyter builds a notebook's table of contents from a markdown copy of it with every `code span` cut out, so
# "## `LoRALinear`" was a blank entry, and with Python-Markdown's slugs, which differ from the ids nbconvert gives the
# headings. nbconvert doesn't make its ids unique either: the section "`LoRALinear`" and the show_doc heading
# "LoRALinear" were both #loralinear, so both entries led to the first. The contents are rebuilt here from the
# headings as drawn, before the search plugin indexes the page's sections by them.
_HEAD = re.compile(r'<h([1-6]) id="([^"]*)">(.*?)<a class="anchor-link" href="#[^"]*">¶</a></h\1>', re.S)

def heading_text(inner:str)->str: return html.unescape(re.sub(r'<[^>]+>', '', inner)).strip()

def on_page_content(content:str, page, **kw)->str:
    "A notebook page with unique heading ids, and its table of contents built from its headings' ids and text."
    if not page.file.src_path.endswith('.ipynb'): return content
    from markdown.extensions.toc import nest_toc_tokens
    from mkdocs.structure.toc import get_toc
    content = folded(content)
    seen, tokens, hidden = set(), [], hidden_spans(content)
    def one(m):
        lvl, uid, inner = int(m[1]), m[2], m[3]
        n = 0
        while uid in seen:
            n += 1
            uid = f'{m[2]}_{n}'
        seen.add(uid)
        if not any(a <= m.start() < b for a, b in hidden):
            tokens.append(dict(level=lvl, id=uid, name=html.escape(heading_text(inner)), children=[]))
        return f'<h{lvl} id="{uid}">{inner}<a class="anchor-link" href="#{uid}">¶</a></h{lvl}>'
    n_heads = content.count('class="anchor-link"')
    content = _HEAD.sub(one, content)
    if len(seen) != n_heads:
        raise SystemExit(f'build_docs: {page.file.src_path}: read {len(seen)} of its {n_heads} headings: '
                         'nbconvert draws them another way now; fix _HEAD')
    # down to h3, as nbdev's Quarto sites: sections and symbols, not every method (their page is the API page)
    page.toc = get_toc(nest_toc_tokens([t for t in tokens if t['level'] <= 3]))
    h1 = next((t['name'] for t in tokens if t['level'] == 1), None)
    if h1: page.title = f"{Path(page.file.src_path).stem.split('_')[0]} {html.unescape(h1)}"  # its number, as in the nav
    return content

# ---- the folds: proofs, long code, and the result's copy, drawn as <details> in the page nbconvert wrote ----
_CELL_DIV = re.compile(r'<div class="jp-Cell ([^"]*)"')
_DIV = re.compile(r'<div\b|</div>')

def div_end(h:str, start:int)->int:
    "Where the <div> that opens at `start` closes (the index after its `</div>`)."
    depth = 0
    for m in _DIV.finditer(h, start):
        depth += 1 if m[0] == '<div' else -1
        if depth == 0: return m.end()
    raise SystemExit('build_docs: a notebook cell\'s <div> is not closed: nbconvert draws cells another way now; fix div_end')

def cells_of(h:str)->list:
    "(start, end, classes) of each notebook cell in a page, in order."
    out, pos = [], 0
    for m in _CELL_DIV.finditer(h):
        if m.start() < pos: continue  # inside the cell before (none are, today)
        pos = div_end(h, m.start())
        out.append((m.start(), pos, m[1].split()))
    return out

def _first_line(cell:str)->str:
    m = re.search(r'<div class="clipboard-copy-txt" id="cell-\d+">(.*?)</div>', cell, re.S)
    lines = html.unescape(m[1]).splitlines() if m else []
    first = next((l for l in lines if re.match(r'(async def|def|class|@)', l)), lines[0] if lines else '')
    return f'<code>{html.escape(first.rstrip(":"))}</code> ({len(lines)} lines)'

def fold_input(cell:str, summary:str)->str:
    "A code cell with its code folded under `summary` and its outputs shown."
    i = cell.find('<div class="jp-Cell-inputWrapper')
    if i < 0: return cell
    j = div_end(cell, i)
    return f'{cell[:i]}<details class="lk-code"><summary>{summary}</summary>{cell[i:j]}</details>{cell[j:]}'

_FOLD_ID = re.compile(r'id="cell-id=lkfold-(\d+)-')

def folded(h:str)->str:
    "The page with each run of proof cells in one <details>, each folded section in another, long code and the result's copy folded, and the result anchored."
    items, pos, run = [], 0, []  # (html, the folded section it belongs to or None)
    def flush():
        if run:
            n = len(run)
            items.append((f'<details class="lk-proof"><summary>✓ {n} cell{"s"[:n>1]} of checks, run as tests with the notebook</summary>'
                          + ''.join(x for x, _ in run) + '</details>', run[0][1]))
            run.clear()
    for a, b, cls in cells_of(h):
        gap, cell, pos = h[pos:a], h[a:b], b
        sec = int(m[1]) if (m := _FOLD_ID.search(cell)) else None
        if gap.strip() or (run and run[-1][1] != sec): flush()
        if gap.strip(): items.append((gap, None))
        if 'celltag_proof' in cls: run.append((cell, sec)); continue
        flush()
        if 'celltag_fold' in cls: cell = fold_input(cell, _first_line(cell))
        if 'celltag_result-copy' in cls: cell = fold_input(cell, 'the code: it runs in its place below')
        items.append((re.sub(r'id="cell-id=(lk-result(?:-first)?)"', r'id="\1"', cell), sec))  # the lead's link, and check_site's mark
    flush()
    out, i = [], 0
    while i < len(items):
        j = i
        while j < len(items) and items[j][1] is not None and items[j][1] == items[i][1]: j += 1
        if j == i: out.append(items[i][0]); i += 1; continue
        out.append(f'<details class="lk-section"><summary>the rest of this section: {j - i} cell{"s"[:j-i>1]}</summary>'
                   + ''.join(x for x, _ in items[i:j]) + '</details>')
        i = j
    return ''.join(out) + h[pos:]

_DETAILS = re.compile(r'<details\b|</details>')

def hidden_spans(h:str)->list:
    "(start, end) of each folded section in a page: its headings stay out of the page's contents."
    out = []
    for m in re.finditer(r'<details class="lk-section">', h):
        depth = 0
        for t in _DETAILS.finditer(h, m.start()):
            depth += 1 if t[0] == '<details' else -1
            if depth == 0: out.append((m.start(), t.end())); break
    return out

_CODE = re.compile(r'(```.*?```|`[^`\n]*`)', re.S)
_MATH = re.compile(r'\$\$(.+?)\$\$|(?<![\\$\w])\$(?=\S)([^$\n]+?)(?<=\S)\$(?![\w$])', re.S)

def tex_to_mathml(md:str)->str:
    "The $...$ and $$...$$ of a markdown cell as MathML, which browsers draw themselves: no MathJax to fetch. Code is left alone."
    from latex2mathml.converter import convert
    def one(m):
        try: return convert(m[1], display='block') if m[1] is not None else convert(m[2])
        except Exception as e: sys.exit(f'build_docs: latex2mathml cannot convert {m[0]!r} ({e}); simplify the TeX')
    parts = _CODE.split(md)  # odd items are code spans and fences
    return ''.join(p if i % 2 else _MATH.sub(one, p) for i, p in enumerate(parts))

MKDOCS = """site_name: lorakit
site_description: A literate PyTorch library for LoRA and QLoRA fine-tuning
docs_dir: docs
theme:
  name: material
  font: false          # Material fetches Google Fonts by default; the site must work offline
  # toc.integrate: the page's contents join the site's in the left column, so the text column is wide enough
  # for 100-character lines of code at 1280 px
  features: [navigation.top, navigation.sections, search.highlight, content.code.copy, toc.integrate]
plugins:
  - search
  - mkdocs-jupyter:
      include_source: true
      ignore_h1_titles: false
      execute: false
      allow_errors: false
      include_requirejs: false
      no_prompt: true      # 'In [ ]:' beside every cell: not run here, and 70 px the code needs
markdown_extensions:
  - tables
  - admonition
  - toc: {permalink: true}
  - pymdownx.highlight
  - pymdownx.superfences
validation:
  links: {not_found: warn, anchors: warn, unrecognized_links: warn}
"""

# The code in a notebook's markdown cells (show_doc's signatures) at the size of its code cells, 13 px: at the
# theme's 16 px a 100-character line is wider than the column.
CSS = """.md-typeset .jupyter-wrapper .jp-RenderedMarkdown pre { font-size: var(--jp-code-font-size, 13px); }
.jupyter-wrapper .celltoolbar { display: none; }  /* the cell's tags: how the site shows it, not for the reader */
/* the folds (proofs, long code, parameters): a quiet line to click, not an admonition box */
.md-typeset details.lk-proof, .md-typeset details.lk-code, .md-typeset details.lk-params, .md-typeset details.lk-section {
  border: none; box-shadow: none; background: none; padding: 0; margin: 0.2em 0 0.8em; font-size: inherit; }
.md-typeset details.lk-proof > summary, .md-typeset details.lk-code > summary, .md-typeset details.lk-params > summary,
.md-typeset details.lk-section > summary {
  background: none; border-left: 3px solid var(--md-default-fg-color--lighter); font-weight: normal; font-size: 0.7rem;
  color: var(--md-default-fg-color--light); padding: 0.1em 1.8em 0.1em 0.6em; margin: 0; }
.md-typeset details.lk-proof > summary::before, .md-typeset details.lk-code > summary::before,
.md-typeset details.lk-params > summary::before, .md-typeset details.lk-section > summary::before { display: none; }
.md-typeset details.lk-proof > summary { border-left-color: #43a047; }
"""

MARK = '.lorakit-site'  # in every built site: a directory without it is not ours to replace

def build(out:Path=SITE, strict:bool=True, only:list=None):
    if out.exists() and any(out.iterdir()) and not (out/MARK).exists():
        sys.exit(f'build_docs: {out} holds files that are not a lorakit site; pass another --out, or empty it first')
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault('NO_MKDOCS_2_WARNING', '1')
    os.environ.setdefault('MPLBACKEND', 'Agg')
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp); docs = tmp/'docs'; (docs/'api').mkdir(parents=True)
        (docs/'index.md').write_text(readme_page())
        (docs/'lorakit.css').write_text(CSS)
        if IMAGES.is_dir(): shutil.copytree(IMAGES, docs/'images')
        nav_nbs, nav_api = {k: [] for k in PARTS}, []
        for p in notebooks(only):
            nb = json.loads(p.read_text())
            exp = next((directives(''.join(c['source'])).get('default_exp') for c in nb['cells'] if c['cell_type'] == 'code' and 'default_exp' in directives(''.join(c['source']))), None)
            mod = importlib.import_module(f'lorakit.{exp}') if exp else None
            page = page_nb(p, mod, f'../api/{exp}/', strict)
            (docs/p.name).write_text(json.dumps(page, indent=1))
            nav_nbs[part_of(p.stem)].append({f'{p.stem.split("_")[0]} {title(nb, p.stem)}': p.name})
            if mod is not None:
                (docs/'api'/f'{exp}.md').write_text(page_api(mod, p.stem))
                nav_api.append({f'lorakit.{exp}': f'api/{exp}.md'})
        import yaml
        cfg = yaml.safe_load(MKDOCS)
        cfg['nav'] = [{'Home': 'index.md'}] + [{k: v} for k, v in nav_nbs.items() if v] + [{'API': nav_api}]
        cfg['hooks'] = [str(Path(__file__).resolve())]  # on_page_content, above
        cfg['extra_css'] = ['lorakit.css']
        (tmp/'mkdocs.yml').write_text(yaml.safe_dump(cfg, sort_keys=False))
        staged = tmp/'site'
        cmd = [sys.executable, '-m', 'mkdocs', 'build', '-q', '-f', str(tmp/'mkdocs.yml'), '-d', str(staged)] + (['--strict'] if strict else [])
        r = subprocess.run(cmd, cwd=tmp)
        if r.returncode: sys.exit(f'build_docs: mkdocs build failed (exit {r.returncode}); the messages above name the page')
        (staged/MARK).write_text('built by tools/build_docs.py\n')
        # _site is replaced only by a complete build
        old = out.with_name(out.name + '.old')
        if old.exists() and (old/MARK).exists(): shutil.rmtree(old)  # left by a build that was stopped here
        if out.exists(): out.rename(old)
        shutil.move(str(staged), out)
        if old.exists(): shutil.rmtree(old)
    n = sum(1 for _ in out.rglob('*.html'))
    print(f'build_docs: wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}/ ({n} pages: README, {sum(map(len, nav_nbs.values()))} notebooks, {len(nav_api)} API pages)')

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--out', type=Path, default=SITE, help='where to write the site (default: _site/)')
    ap.add_argument('--no-strict', action='store_true', help="don't stop at mkdocs warnings (broken links, say)")
    ap.add_argument('--only', nargs='+', metavar='NB', help='only these notebooks (stems: 07_train), for a quick look; implies --no-strict')
    a = ap.parse_args()
    build(a.out.resolve(), strict=not (a.no_strict or a.only), only=a.only)
