#!/usr/bin/env python
"""Open every page of the built docs site in headless Chromium and check what a reader would see.

    python tools/build_docs.py && python tools/check_site.py

For each page, in a 1280x900 window, it checks that the page loads without a console error, a page error or a
failed request (the site must work offline), that every image has rendered (natural width > 0), that every notebook
page shows as many images as its notebook holds, that no TeX is left as text outside code, that each entry of the
page's table of contents reads as the heading it links to, that no id is on two elements, and that no memory address
(`<function f at 0x7f...>`) is shown. On notebook and API pages, no block of code may need sideways scrolling (the
project's lines are at most 100 characters) or be shown under 13 px; a cell's outputs wrap instead. It checks that
every link within the site leads to a page that exists, and, where the link names an anchor, to an element with
that id. On each notebook page it checks how the page reads: at most about 25 screens of 1280x900 with its folds closed (26 allowed, for fonts),
prose before its first code, and its result (the copy of its `#| result` cell) starting by the third screen; it
prints each page's length and its result's screen, and keeps them in `_site/screenshots/reading.json`. From the
built files alone it checks that every show_doc block documents lorakit's own object, and after a cell, the one that
cell defines (a `@patch` method as `Class.method`). Then it types exported symbols into the search box and checks that the results name them. It writes
screenshots of the landing page and of notebook pages (07_train and 14_dpo as they open, 07's curves, 01's code) to
`_site/screenshots/`. It uses Debian's Chromium
(`apt-get install chromium`) through Playwright, and downloads nothing.
"""
import argparse, ast, functools, html, http.server, inspect, json, os, re, shutil, sys, textwrap, threading, tokenize
from pathlib import Path
from urllib.parse import urljoin, urldefrag, urlparse

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT/'_site'
CHROMIUM_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
                 '--disable-component-update', '--disable-sync']
SEARCHES = ['TrainConfig', 'quantize_nf4', 'load_tokenizer']  # exported symbols from three notebooks

# The page's table of contents, entry by entry: its text and the text of the heading it links to (less the heading's
# permalink), whitespace normalized. mkdocs-jupyter once left "`LoRALinear`" a blank entry and the links still worked.
TOC_JS = r"""() => { const norm = s => s.replace(/\s+/g, ' ').trim();
  return [...document.querySelectorAll('.md-nav--secondary a.md-nav__link[href^="#"]')].map(a => {
    const id = decodeURIComponent(a.getAttribute('href').slice(1)), h = document.getElementById(id);
    if (!h) return [norm(a.textContent), id, null];
    const c = h.cloneNode(true); c.querySelectorAll('a.headerlink, a.anchor-link').forEach(e => e.remove());
    return [norm(a.textContent), id, norm(c.textContent)]; }); }"""
# Ids that more than one element carries: a link or a contents entry to the second leads to the first.
DUP_IDS_JS = r"""() => { const n = {}; document.querySelectorAll('article [id]').forEach(e => n[e.id] = (n[e.id] || 0) + 1);
  return Object.keys(n).filter(k => n[k] > 1); }"""
# Code the reader has to scroll sideways to read: every block of code in the article except a cell's outputs (a
# notebook's outputs wrap, as in JupyterLab: a traceback or a long printed line is read whole, not scrolled).
# [first line, longest line's length] of each block that is wider than the box it is shown in.
WIDE_CODE_JS = r"""() => [...document.querySelectorAll('article pre')].filter(p => !p.closest('.jp-OutputArea'))
  .filter(p => [p.parentElement, p, ...p.children].some(e => e.scrollWidth > e.clientWidth + 1))
  .map(p => { const ls = p.textContent.split('\n'); return [ls.find(l => l.trim()) || '', Math.max(...ls.map(l => l.length))]; })"""
ADDRESS_JS = r"""() => (document.querySelector('article')?.innerText.match(/.{0,40}\bat 0x[0-9a-f]{6,}/g) || [])"""
CODE_PX = 13  # the least font size, in px, that code may be shown in
CODE_FONT_JS = r"""() => [...document.querySelectorAll('article pre')].map(p => parseFloat(getComputedStyle(p.querySelector('code') || p).fontSize))"""

# the picture of the nudge panel on 12a_panel's page, drawn (a broken link draws nothing)
PANEL_JS = "() => [...document.querySelectorAll('article img')].some(i => /nudge_panel/.test(i.src) && i.naturalWidth > 0)"
# scroll the first element that matches a CSS selector into view; false if there is none
SCROLL_JS = "sel => { const e = document.querySelector(sel); if (e) e.scrollIntoView(); return !!e; }"

def find_chromium():
    for c in (os.environ.get('CHROMIUM'), '/usr/bin/chromium', shutil.which('chromium'), shutil.which('chromium-browser')):
        if c and Path(c).exists(): return c

def serve(root:Path):
    "A quiet HTTP server for `root` on a free localhost port, in a thread; returns (server, base url)."
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a): pass
    srv = http.server.ThreadingHTTPServer(('127.0.0.1', 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f'http://127.0.0.1:{srv.server_address[1]}/'

def pages(site:Path)->list:
    "Site-relative URLs of every page, the landing page first."
    urls = sorted(p.relative_to(site).as_posix() for p in site.rglob('*.html') if p.name != '404.html')
    urls = [u[:-len('index.html')] if u.endswith('index.html') else u for u in urls]
    return sorted(urls, key=lambda u: (u != '', u))

def nb_images(site_url:str)->int | None:
    "Image outputs in the notebook behind a notebook page (None for other pages); the result's twice (its copy after the intro)."
    nb = ROOT/'nbs'/f"{site_url.strip('/')}.ipynb"
    if '/' in site_url.strip('/') or not nb.exists(): return None
    cells = json.loads(nb.read_text())['cells']
    flag = lambda c, f: any(l.startswith('#|') and l[2:].split()[:1] == [f] for l in ''.join(c['source']).splitlines())
    return sum(1 + flag(c, 'result') for c in cells if c['cell_type'] == 'code' and not flag(c, 'hide')
               for o in c.get('outputs', []) if any(k.startswith('image/') for k in o.get('data', {})))

# ---- how a notebook page reads: its length, what it opens with, and where its result is ----
# screens of 1280x900: the longest page, and the screen its result must start on. Pages are kept to about 25 screens;
# the check allows 26, since another machine's fonts can make a page a few percent taller than where it was measured.
MAX_SCREENS, RESULT_BY = 26, 3
READ_JS = r"""() => { const cells = [...document.querySelectorAll('article .jp-Notebook-cell')];
  const code = cells.findIndex(c => c.classList.contains('jp-CodeCell'));
  const prose = cells.slice(0, code < 0 ? cells.length : code).some(c => [...c.querySelectorAll('p')]
    .some(p => !p.closest('blockquote') && p.innerText.split(/\s+/).length >= 8));
  const r = document.getElementById('lk-result-first');
  return [document.documentElement.scrollHeight, prose, r ? r.getBoundingClientRect().top + window.scrollY : null]; }"""

def reading(u:str, height:float, prose:bool, result_y)->tuple[list, dict]:
    "Problems with how a notebook page reads, and its figures: screens long, and the screen its result starts on."
    screens, at = height / 900, None if result_y is None else int(result_y // 900) + 1
    problems = [] if prose else [f'{u}: the page opens with code: its first sentence comes first (move the intro above the imports)']
    if screens > MAX_SCREENS: problems.append(f'{u}: {screens:.0f} screens long at 1280x900 (at most {MAX_SCREENS}): '
                                               'fold proofs (`#| proof`) or split the notebook')
    if at is None: problems.append(f"{u}: shows no result after its intro: mark the cell it builds towards `#| result`")
    elif at > RESULT_BY: problems.append(f'{u}: its result starts on screen {at} (by {RESULT_BY}): shorten the intro')
    return problems, dict(screens=round(screens, 1), result_screen=at)

# ---- what each show_doc block documents, read from the built pages (no browser needed) ----
# A show_doc block: a heading, lorakit's source link (absent for an object from elsewhere), then the signature.
_CELL = re.compile(r'<div class="jp-Cell ')
_CODE_TXT = re.compile(r'<div class="clipboard-copy-txt" id="cell-\d+">(.*?)</div>', re.S)
_DOC = re.compile(r'<h([2-4]) id="[^"]*">(.*?)<a class="(?:anchor-link|headerlink)"[^>]*>(?:¶|&para;)</a></h\1>\s*'
                  r'(?:<p><small><a href="[^"]*?/(lorakit/\w+\.py)#L(\d+)">source</a></small></p>\s*)?'
                  r'<div class="highlight"><pre><span></span>(.*?)</pre>', re.S)

def _defined(code:str)->dict:
    "What a cell's code defines, as {documented name: its ast}: `f`, `C`, and a `@patch` method as `C.m`."
    sys.path.insert(0, str(ROOT/'tools'))
    from build_docs import patched_classes
    try: tree = ast.parse(code)
    except SyntaxError: return {}
    out = {}
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            out.update({f'{c}.{n.name}': n for c in patched_classes(n)} or {n.name: n})
    return out

def _definition_at(file:str, line:int):
    "The function or class whose source begins at `line` of lorakit's `file` (decorators first), as an ast; None if none does."
    lines = (ROOT/file).read_text().splitlines(True)[line-1:]
    try: return ast.parse(textwrap.dedent(''.join(inspect.getblock(lines)))).body[0]
    except (SyntaxError, IndexError, IndentationError, tokenize.TokenError): return None

def _doc_problem(u:str, name:str, file, line, cell_defs:dict|None)->str|None:
    "What is wrong with one documented symbol: not lorakit's, or (after a cell) not the definition that cell holds."
    if not file: return f'{u}: {name} is documented with no source link into lorakit: another object under its name, or a wrapper'
    node, where = _definition_at(file, int(line)), f'{file}:{line}'
    if not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
        return f'{u}: {name} links to {where}, where no function or class begins'
    if cell_defs is None: return None  # a method listed under its class, or an API page
    if name not in cell_defs:
        return f'{u}: {name} is documented after a cell that defines {", ".join(cell_defs) or "nothing"}'
    if ast.dump(node) != ast.dump(cell_defs[name]): return f'{u}: {name} shows {where}, not the definition in its cell'

def documented_objects(site:Path=SITE)->list:
    "Each show_doc block documents lorakit's own object, and after a cell, the one that cell defines (`Class.method` if patched)."
    problems = []
    for page in sorted(site.glob('*/index.html')) + sorted(site.glob('api/*/index.html')):
        u, h = page.parent.relative_to(site).as_posix() + '/', page.read_text()
        code = ''
        for body in _CELL.split(h)[1:] or [h]:  # an API page is markdown: one body
            if m := _CODE_TXT.search(body): code = html.unescape(m[1])
            for lvl, head, file, line, sig in _DOC.findall(body):
                name = heading_text(head)
                if not re.match(rf'(async def|def|class) {re.escape(name)}\(', heading_text(sig)): continue
                cell_defs = _defined(code) if lvl == '3' and not u.startswith('api/') else None
                problems.append(_doc_problem(u, name, file, line, cell_defs))
    return [p for p in problems if p]

def heading_text(inner:str)->str: return html.unescape(re.sub(r'<[^>]+>', '', inner)).strip()

def check(site:Path=SITE, shots:Path=None)->list:
    from playwright.sync_api import sync_playwright
    shots = shots or site/'screenshots'
    problems, ids, links, read = [], {}, [], {}
    srv, base = serve(site)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={'width': 1280, 'height': 900})
            errs = []
            page.on('console', lambda m: m.type == 'error' and errs.append(f'console: {m.text}'))
            page.on('pageerror', lambda e: errs.append(f'page error: {e}'))
            # ERR_ABORTED is a request cut off by leaving the page (the search worker, still loading), not a missing file
            page.on('requestfailed', lambda r: 'ERR_ABORTED' not in (r.failure or '') and errs.append(f'request failed: {r.url} ({r.failure})'))
            urls = pages(site)
            for u in urls:
                errs.clear()
                resp = page.goto(base + u, wait_until='networkidle')
                if resp is None or resp.status != 200: problems.append(f'{u or "/"}: HTTP {resp.status if resp else "no response"}')
                problems += [f'{u or "/"}: {e}' for e in errs]
                imgs = page.eval_on_selector_all('img', 'els => els.map(i => [i.currentSrc.slice(0, 80), i.complete && i.naturalWidth > 0])')
                problems += [f'{u or "/"}: image did not render: {src}' for src, ok in imgs if not ok]
                want = nb_images(u)
                if want is not None:
                    got = page.eval_on_selector_all('.jp-OutputArea img', 'els => els.filter(i => i.naturalWidth > 0).length')
                    if got != want: problems.append(f'{u}: shows {got} output images, the notebook holds {want}')
                tex = page.evaluate(r"""() => { const a = document.querySelector('article'); if (!a) return [];
                    const c = a.cloneNode(true); c.querySelectorAll('pre, code').forEach(e => e.remove());
                    return c.textContent.match(/\$[^$\n]*\\[a-zA-Z]+[^$\n]*\$/g) || []; }""")
                problems += [f'{u or "/"}: TeX shown as text, not drawn: {t[:60]}' for t in tex]
                ids[u] = set(page.eval_on_selector_all('[id]', 'els => els.map(e => e.id)'))
                for text, id_, head in page.evaluate(TOC_JS):
                    if head is None: problems.append(f'{u or "/"}: contents entry {text!r} links to no heading (#{id_})')
                    elif text != head: problems.append(f'{u or "/"}: contents entry {text!r} links to the heading {head!r} (#{id_})')
                problems += [f'{u or "/"}: the id #{i} is on more than one element' for i in page.evaluate(DUP_IDS_JS)]
                problems += [f'{u or "/"}: a memory address, different in every build: {t.strip()}' for t in page.evaluate(ADDRESS_JS)]
                if nb_images(u) is not None:
                    p, fig = reading(u, *page.evaluate(READ_JS))
                    problems += p; read[u] = fig
                if nb_images(u) is not None or u.startswith('api/'):  # notebook and API pages
                    for first, n in page.evaluate(WIDE_CODE_JS):
                        problems.append(f'{u}: code scrolls sideways at 1280 px (longest line {n} chars): {first.strip()[:70]}')
                    small = [px for px in page.evaluate(CODE_FONT_JS) if px < CODE_PX]
                    if small: problems.append(f'{u}: {len(small)} code blocks in a font under {CODE_PX} px ({min(small)} px)')
                for href in page.eval_on_selector_all('a[href]', 'els => els.map(a => a.href)'):
                    if href.startswith(base): links.append((u, href))
            # internal links: the page exists, and so does the anchor
            known = {base + u for u in urls}
            for src, href in sorted(set(links)):
                target, frag = urldefrag(href)
                if target.endswith('index.html'): target = target[:-len('index.html')]
                if target not in known:
                    path = site/urlparse(target).path.lstrip('/')
                    if not path.is_file(): problems.append(f'{src or "/"}: link to a missing page: {href}')
                    continue
                if frag and frag not in ids[target[len(base):]]: problems.append(f'{src or "/"}: link to a missing anchor: {href}')
            # search, as a reader types it into the box on the landing page
            for sym in SEARCHES:
                page.goto(base, wait_until='load')
                page.fill('input.md-search__input', sym)
                try:
                    page.wait_for_selector(f'.md-search-result__item >> text={sym}', timeout=15_000)
                except Exception:
                    got = page.eval_on_selector_all('.md-search-result__item', 'els => els.map(e => e.innerText.slice(0, 60))')
                    problems.append(f'search for {sym!r} did not find it: results {got[:3]}')
            shots.mkdir(parents=True, exist_ok=True)
            page.goto(base, wait_until='load'); page.screenshot(path=shots/'index.png')
            page.goto(base + '07_train/', wait_until='load'); page.screenshot(path=shots/'07_train.png', full_page=False)
            if not page.evaluate(SCROLL_JS, '.jp-OutputArea img'): problems.append('07_train/: shows no plot to screenshot')
            page.screenshot(path=shots/'07_train_curves.png')
            page.goto(base + '14_dpo/', wait_until='load'); page.screenshot(path=shots/'14_dpo.png')  # a result first
            page.goto(base + '12a_panel/', wait_until='load')  # the nudge panel, as a picture of it in JupyterLab
            if not page.evaluate(PANEL_JS): problems.append('12a_panel/: the picture of the nudge panel is not shown')
            page.goto(base + '01_lora/', wait_until='load')  # a page of code: 100-character lines, no scrollbars
            if not page.evaluate(SCROLL_JS, '#loralinear'): problems.append('01_lora/: no #loralinear heading')
            page.screenshot(path=shots/'01_lora_code.png')
            browser.close()
    finally: srv.shutdown()
    problems = list(dict.fromkeys(problems))  # a page may draw its contents twice (the sidebar, and the drawer)
    shots.mkdir(parents=True, exist_ok=True)
    (shots/'reading.json').write_text(json.dumps(read, indent=1))  # each notebook page's length and its result's screen
    for u, f in read.items(): print(f"check_site: {u:20s} {f['screens']:5.1f} screens, result on screen {f['result_screen']}")
    print(f'check_site: {len(urls)} pages, {len(set(links))} internal links, {len(SEARCHES)} searches; screenshots in {shots}')
    return problems

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--site', type=Path, default=SITE)
    a = ap.parse_args()
    if not (a.site/'index.html').exists(): sys.exit(f'check_site: no site at {a.site}: run python tools/build_docs.py first')
    problems = documented_objects(a.site.resolve())  # from the files: with a browser or without
    if not find_chromium():
        for p in problems: print('check_site:', p)
        print('check_site: SKIPPED the browser: no Chromium on this machine (apt-get install chromium, or set CHROMIUM=/path/to/it)')
        sys.exit(1 if problems else 0)
    problems += check(a.site.resolve())
    for p in problems: print('check_site:', p)
    print(f'check_site: {"FAILED, " + str(len(problems)) + " problems" if problems else "all pages passed"}')
    sys.exit(1 if problems else 0)
