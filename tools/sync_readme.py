#!/usr/bin/env python
"""Write README.md from nbs/index.ipynb, since nbdev-readme needs Quarto, which isn't available.

    python tools/sync_readme.py           # rewrite README.md
    python tools/sync_readme.py --check   # exit 1, with a diff, if README.md is out of step
"""
import difflib, json, os, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NB, README = ROOT/'nbs'/'index.ipynb', ROOT/'README.md'
HEADER = '<!-- Generated from nbs/index.ipynb by tools/sync_readme.py: edit the notebook, then run the script. -->\n\n'

def _directives(lines):
    "The first words of the `#|` lines of a cell."
    return {l[2:].split()[0] for l in lines if l.startswith('#|') and l[2:].split()}

def _printed(c)->str:
    "What a code cell printed (stdout) or returned as text, as the notebook holds it."
    out = []
    for o in c.get('outputs', []):
        if o.get('output_type') == 'stream' and o.get('name') == 'stdout': out.append(''.join(o['text']))
        elif 'text/plain' in o.get('data', {}): out.append(''.join(o['data']['text/plain']) + '\n')
    return ''.join(out).strip('\n')

def render(nb_path=NB)->str:
    "README text: markdown cells as they are, code cells fenced with what they print, `#| hide` cells out."
    parts = []
    for c in json.loads(Path(nb_path).read_text())['cells']:
        lines = ''.join(c['source']).splitlines()
        if _directives(lines) & {'hide', 'default_exp'}: continue
        body = '\n'.join(l for l in lines if not l.startswith('#|')).strip()
        if not body: continue
        if c['cell_type'] == 'markdown': parts.append(body)
        else:
            parts.append(f'```python\n{body}\n```')
            if printed := _printed(c): parts.append(f'```\n{printed}\n```')
    return HEADER + '\n\n'.join(parts) + '\n'

def main(check=False):
    new = render()
    old = README.read_text() if README.exists() else ''
    if check:
        if new == old: return 0
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True), 'README.md', 'from nbs/index.ipynb'))
        print('\nREADME.md is out of step with nbs/index.ipynb: run `python tools/sync_readme.py` and commit the result.')
        return 1
    fd, tmp = tempfile.mkstemp(dir=ROOT, prefix='.README.', suffix='.tmp')
    with os.fdopen(fd, 'w') as f: f.write(new)
    os.replace(tmp, README)
    return 0

if __name__ == '__main__': sys.exit(main(check='--check' in sys.argv[1:]))
