#!/usr/bin/env python
"""Render 12a_panel's `NudgePanel` in JupyterLab in headless Chromium, click it, and check what the kernel holds.

    python tools/check_panel.py                  # the check
    python tools/check_panel.py --write-image    # ... and (re)write nbs/images/nudge_panel.png, the docs' picture of it

It starts JupyterLab on localhost, without a token, in a temporary directory holding a small notebook that builds a
`NudgePanel` on the toy `BlockProxy` (a run takes milliseconds), opens the notebook in Debian's Chromium through
Playwright (downloading nothing), and runs it. Then, as a user would, it types a learning rate into the panel's box
and clicks "nudge up" twice and "nudge down" twice, and after each step it asks the kernel for the panel's values:
they must be exactly the grid values 1e-3, 3e-3, 9e-3, 3e-3, 1e-3, as the browser must never round them, and the
way down must find its configs in the ratchet's store instead of running new ones. It also checks that no label or
button text is cut off, there and on a second panel that shows every hyperparameter, and that the plot's legend is
shown at least 12 px high. Last, it takes a screenshot of the panel. It skips, saying so, where there is no Chromium.
It takes about a minute and a half on a busy 2-core machine.
"""
import argparse, json, os, shutil, signal, socket, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IMAGE = ROOT/'nbs'/'images'/'nudge_panel.png'
sys.path.insert(0, str(ROOT/'tools'))
from check_site import CHROMIUM_ARGS, find_chromium

START, TYPED = 0.005389, 0.001  # the panel starts off any slider's grid; a user then types 1e-3 into the box
CLICKS = [('nudge up', 3e-3), ('nudge up', 9e-3), ('nudge down', 3e-3), ('nudge down', 1e-3)]
BUILD = f"""from lorakit.nudge import BlockProxy, Ratchet
from lorakit.panel import NudgePanel
rt = Ratchet('store.json', BlockProxy(config=dict(lr=1e-3)), log=None)
p = NudgePanel(rt, cfg=dict(lr={START!r}, steps=100, bs=64))
p"""
# a panel with every knob, on a task that makes up its runs at once: only its labels are looked at
EVERY = """from lorakit.nudge import ProxyRun
class Instant:
    config, identity = dict(lr=2e-3, r=8, alpha=16.0, dropout=0.05, warmup=2, weight_decay=0.0), dict(task='instant')
    def __call__(self, cfg, seed): return ProxyRun(seed, [3 - i/20 for i in range(20)], 2 + seed/100, 0.)
NudgePanel(Ratchet('instant.json', Instant(), log=None))"""
STATE = ("import json, lorakit.panel as P\n"
         "print(json.dumps(dict(values=p.values, shown=p.controls['lr'].value, busy=p.busy, "
         "rows=[r['lr'] for r in p.rows], records=len(rt.store['records']), legend=P._LEGEND * P._DPI / 72)))")
# run code in the notebook's kernel and return what it prints: the kernel holds the values that count
KERNEL_RUN = """async (code) => {
    const kernel = window.jupyterapp.shell.currentWidget.sessionContext.session.kernel;
    let out = '';
    const future = kernel.requestExecute({code, stop_on_error: true});
    future.onIOPub = m => {
        if (m.header.msg_type === 'stream') out += m.content.text;
        if (m.header.msg_type === 'error') out += `ERROR ${m.content.ename}: ${m.content.evalue}`;
    };
    await future.done;
    return out;
}"""
# every label and button text of the panel: its text's width, and the width it is given
CUT = """() => [...document.querySelectorAll('.jp-OutputArea .widget-label, .jp-OutputArea .widget-button')]
    .filter(e => e.offsetParent !== null && e.textContent.trim())
    .map(e => [e.textContent.trim(), e.scrollWidth, e.clientWidth])"""
IMG = """() => { const i = document.querySelector('.jp-OutputArea .widget-image');
    return i && i.complete ? [i.naturalWidth, i.getBoundingClientRect().width] : null; }"""

def notebook(d:Path)->Path:
    cells = [dict(cell_type='code', id=k, metadata={}, source=src, outputs=[], execution_count=None)
             for k, src in (('panel', BUILD), ('every', EVERY))]
    nb = dict(nbformat=4, nbformat_minor=5, cells=cells,
              metadata=dict(kernelspec=dict(name='python3', display_name='Python 3', language='python')))
    p = d/'panel.ipynb'
    p.write_text(json.dumps(nb))
    return p

def free_port()->int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]

def start_lab(d:Path, port:int)->subprocess.Popen:
    "JupyterLab on localhost, token-less, serving `d`, with its app exposed to the page as `window.jupyterapp`."
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(d/'.config'), JUPYTER_RUNTIME_DIR=str(d/'.runtime'),
               JUPYTERLAB_WORKSPACES_DIR=str(d/'.workspaces'), MPLBACKEND='Agg',
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # the kernel's python
    cmd = [sys.executable, '-m', 'jupyterlab', '--no-browser', '--ip=127.0.0.1', f'--port={port}',
           f'--ServerApp.root_dir={d}', "--IdentityProvider.token=", '--ServerApp.password=',
           '--LabApp.expose_app_in_browser=True', '--LabApp.news_url=None',
           '--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate', '--LabApp.extension_manager=readonly',
           '--allow-root']  # CI may run as root
    lab = subprocess.Popen(cmd, cwd=d, env=env, stdout=open(d/'lab.log', 'w'), stderr=subprocess.STDOUT,
                           start_new_session=True)
    for _ in range(240):
        if lab.poll() is not None: break
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}/api/status', timeout=2): return lab
        except OSError: time.sleep(0.5)
    sys.exit(f"check_panel: JupyterLab did not start; its log:\n{(d/'lab.log').read_text()[-3000:]}")

def stop_lab(lab:subprocess.Popen):
    "Stop the server and, with it, the kernel it started (both in the process group made for the server)."
    if lab.poll() is None:
        lab.send_signal(signal.SIGTERM)
        try: lab.wait(20)
        except subprocess.TimeoutExpired: pass
    try: os.killpg(lab.pid, signal.SIGKILL)  # what is left of the group: a kernel the server did not stop
    except (ProcessLookupError, PermissionError): pass

def state(page)->dict:
    out = page.evaluate(KERNEL_RUN, STATE)
    try: return json.loads(out)
    except json.JSONDecodeError: sys.exit(f"check_panel: the kernel said: {out}")

def settle(page, rows:int, timeout:float=60)->dict:
    "The kernel's state once the panel has `rows` rows of history and no run going."
    t = time.monotonic()
    while True:
        s = state(page)
        if len(s['rows']) >= rows and not s['busy']: return s
        if time.monotonic() - t > timeout: sys.exit(f"check_panel: the panel did not finish a run: {s}")
        time.sleep(0.3)

def check(shot:Path)->list:
    from playwright.sync_api import sync_playwright
    problems = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        nb, port = notebook(d), free_port()
        lab = start_lab(d, port)
        try:
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
                page = browser.new_page(viewport={'width': 1280, 'height': 1000})
                errs = []
                page.on('pageerror', lambda e: errs.append(f'page error: {e}'))
                page.goto(f'http://127.0.0.1:{port}/lab/tree/{nb.name}', wait_until='load')
                page.wait_for_function("() => window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel",
                                       timeout=90_000)
                page.evaluate("""async () => { const w = window.jupyterapp.shell.currentWidget;
                    await w.context.ready; await w.sessionContext.ready;
                    await window.jupyterapp.commands.execute('notebook:run-all-cells'); }""")
                page.get_by_role('button', name='nudge up').nth(1).wait_for(timeout=90_000)  # both panels drawn
                page.wait_for_function(f"() => ({IMG})() !== null", timeout=30_000)  # the plot is drawn
                box = page.locator('.jp-OutputArea .widget-text').filter(has=page.locator('label', has_text='lr'))
                box = box.first.locator('input')
                time.sleep(1)  # time for a widget to send back a value it changed
                s = state(page)
                if s['values']['lr'] != START or box.input_value() != repr(START):
                    problems.append(f"the panel starts at {s['values']['lr']!r} in the kernel, {box.input_value()!r} "
                                    f"in the browser, not at {START!r}")
                box.fill(repr(TYPED))
                box.press('Enter')
                page.wait_for_timeout(500)
                s = state(page)
                if s['values']['lr'] != TYPED: problems.append(f"typed {TYPED!r}, the kernel holds {s['values']['lr']!r}")
                for i, (button, want) in enumerate(CLICKS, 1):
                    page.get_by_role('button', name=button).first.click()
                    s = settle(page, i)
                    page.wait_for_function(f"() => document.querySelector('.jp-OutputArea .widget-text input').value "
                                           f"=== {json.dumps(repr(want))}", timeout=10_000)
                    if (s['values']['lr'], s['rows'][-1]) != (want, want):
                        problems.append(f"after {button} #{i}: the kernel holds lr {s['values']['lr']!r} and ran "
                                        f"{s['rows'][-1]!r}, not {want!r}")
                    if box.input_value() != repr(want):
                        problems.append(f"after {button} #{i}: the box shows {box.input_value()!r}, not {want!r}")
                if s['records'] != 3:
                    problems.append(f"the store holds {s['records']} configs, not 3 (1e-3, 3e-3, 9e-3): "
                                    f"a nudge missed the store")
                for text, need, has in page.evaluate(CUT):
                    if need > has: problems.append(f"{text!r} is cut off: {need} px of text in {has} px")
                natural, shown = page.evaluate(IMG)
                if (px := s['legend'] * shown / natural) < 12:
                    problems.append(f"the plot's legend is {px:.1f} px high, shown at {shown:.0f} of its "
                                    f"{natural} px: under 12 px is hard to read")
                problems += errs
                shot.parent.mkdir(parents=True, exist_ok=True)
                page.locator('.jp-OutputArea .widget-vbox').first.screenshot(path=str(shot))
                print(f"check_panel: lr {START} -> typed {TYPED} -> {', '.join(f'{b} {w}' for b, w in CLICKS)}; "
                      f"kernel and browser agree at each step; screenshot {shot}")
                browser.close()
        finally: stop_lab(lab)
    return problems

if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--write-image', action='store_true', help=f'write the screenshot to {IMAGE.relative_to(ROOT)}')
    a = ap.parse_args()
    if not find_chromium():
        print('check_panel: SKIPPED: no Chromium on this machine (apt-get install chromium, or set CHROMIUM=/path/to/it)')
        sys.exit(0)
    try: import jupyterlab, playwright  # noqa: F401
    except ImportError as e: sys.exit(f'check_panel: {e.name} is not installed: pip install -e ".[docs]"')
    shot = IMAGE if a.write_image else Path(tempfile.gettempdir())/'lorakit-check_panel'/'nudge_panel.png'
    problems = check(shot)
    for p in problems: print(f'check_panel: {p}')
    sys.exit(1 if problems else 0)
