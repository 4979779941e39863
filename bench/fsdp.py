#!/usr/bin/env python
"""FSDP2 on CPU: per-rank peak memory and step time of a sharded QLoRA fine-tune at world sizes 1 and 2, beside one plain process.

    python bench/fsdp.py                 # the shipped base and SmolLM2-135M, QLoRA (nf4), CPU (about 8 minutes on 2 cores)
    python bench/fsdp.py --quick         # the shipped base only, 6 steps: a smoke test (about a minute)
    python bench/fsdp.py --quant none    # LoRA on the float32 base instead of NF4
    python bench/fsdp.py --steps 12 --bs 8 --seq-len 128   # the same steps and batch for both models

Each configuration runs in its own processes: the plain reference (`Llama.from_pretrained`, `add_lora`,
`train`) as one subprocess, and the sharded run (`load_sharded`, `Sharded`, `sharded_loss`, `train`) as
`python -m torch.distributed.run --nproc_per_node N bench/fsdp.py --worker ...` for N = 1 and 2 on gloo;
each rank writes its figures to a JSON file that the parent reads. All of them train all-linear LoRA
r 8, alpha 16, dropout 0.05 with AdamW on the same global batch (a rank of N takes bs / N of its rows),
float32 compute, the loss the job picks (`pick_loss`: plain for the byte-level base, chunked for SmolLM2).

- peak tensor memory: the most bytes of live tensor storage on one rank over steps 1 and 2 (step 2 is
  the first with optimizer state), tracked op by op by `lorakit.memory.MemoryTimeline`, adapted here
  to FSDP2 (see `RankTimeline`); the largest rank's figure.
- shards: the bytes a rank holds at the end of the run, `lorakit.fsdp.rank_bytes`: its shards of the
  frozen base (NF4 state included), of the LoRA weights and of the optimizer state.
- step time: the median wall time of the steps after the first two, the clock read at each step's start;
  the last step (which validates) is left out.
- RSS at load: each rank's peak resident memory once the model is loaded (the rise over its RSS before
  loading in brackets); rank 0 reads each whole tensor before it scatters the shards.
- RSS rise in steps 1-2: the resident high-water mark over the two tracked steps, less the RSS before them.

Expect world size 2 a little above half the peak of world size 1: the root's parameters (the embedding,
tied to the head: 108 MiB in float32 for SmolLM2) are gathered whole on every rank for the step.

The machine's threads (`--threads`, default all cores) are split evenly over the ranks, so every row uses
the same cores: world size 1 with 2 threads against world size 2 with 1 thread each, on a 2-core machine.
With a GPU, one more table: a CUDA run at world size 1, fully sharded, its `torch.cuda.max_memory_allocated`
beside `lorakit.memory.estimate_memory`'s prediction.
"""
import argparse, json, os, statistics, subprocess, sys, tempfile, time, weakref
from pathlib import Path
import torch

MODELS = {'base': 'shipped base (3.1M)', 'smollm2': 'SmolLM2-135M'}
SIZES = {'base': (8, 128, 16), 'smollm2': (4, 256, 8)}  # default rows, tokens a row, steps
LORA = dict(targets='all-linear', r=8, alpha=16, dropout=0.05)
MEM_STEPS = 2  # steps tracked for memory; they are also the warm-up that the step time leaves out

def mib(b): return b / 2**20

# ---------------------------------------------------------------- worker side

def checkpoint(which):
    from lorakit.pretrain import base_path
    from lorakit.gguf import smollm2_checkpoint
    return base_path() if which == 'base' else smollm2_checkpoint()

def vm(key):
    "VmRSS or VmHWM of this process, in MiB, from /proc (None where there is none)."
    try:
        for line in Path('/proc/self/status').read_text().splitlines():
            if line.startswith(key + ':'): return int(line.split()[1]) / 1024
    except OSError: pass
    return None

def reset_hwm():
    "Set this process's resident high-water mark (VmHWM) back to its current RSS (Linux 4.0+)."
    try: Path('/proc/self/clear_refs').write_text('5')
    except OSError: pass

def timeline_class():
    "`RankTimeline`: MemoryTimeline made right for a rank of FSDP2 (built lazily, so the parent needn't import lorakit.memory)."
    from torch.distributed.tensor import DTensor
    from lorakit.memory import MemoryTimeline

    def storage(t): return (t.to_local() if isinstance(t, DTensor) else t).untyped_storage()

    class RankTimeline(MemoryTimeline):
        """MemoryTimeline, with two changes for FSDP2 (both harmless to a plain model):
        a DTensor counts as its local shard (the wrapper's own storage has the global size), and a storage
        resized in place counts at its current size. FSDP2 gathers a layer's weights into buffers that it
        frees with `untyped_storage().resize_(0)` and regrows for the next gather, an event that no
        dispatch mode sees; `resize_` is wrapped while the timeline is open, and such buffers count as weights."""
        def _resized(self, st):
            if st.device.type == 'meta': return
            if st not in self.ids: return self._add(st, 'weights')
            i = self.ids[st]; d = st.nbytes() - self.size[i]
            self.cat.setdefault(i, 'weights'); self.size[i] += d
            if d: self._event(i, d)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            bw = torch._C._current_autograd_node() is not None
            if bw and self.phase == 'forward':
                for i in self._fwd: self.cat.setdefault(i, 'activations')
                self._fwd, self.phase = set(), 'backward'
            elif not bw and self.phase == 'backward': self.phase = 'forward'
            for t in torch.utils._pytree.tree_flatten(out)[0]:
                if isinstance(t, torch.Tensor): self._add(storage(t))
            return out

        def classify(self, opt=None):
            opt = opt or self.opt
            for p in self.model.parameters():
                if p.grad is not None: st = storage(p.grad); self._add(st); self.cat[self.ids[st]] = 'grads'
            for s in (opt.state.values() if opt else ()):
                for t in s.values():
                    if isinstance(t, torch.Tensor) and storage(t) in self.ids: self.cat[self.ids[storage(t)]] = 'optimizer'

        def __enter__(self):
            for p in self.model.parameters(): self._add(storage(p), 'lora' if p.requires_grad else 'weights')
            for b in self.model.buffers(): self._add(storage(b), 'weights')
            self.classify()
            self._resize = torch.UntypedStorage.resize_
            def resize_(st, n, _orig=self._resize):
                out = _orig(st, n); self._resized(st); return out
            torch.UntypedStorage.resize_ = resize_
            return super(MemoryTimeline, self).__enter__()

        def __exit__(self, *exc):
            torch.UntypedStorage.resize_ = self._resize
            return super(MemoryTimeline, self).__exit__(*exc)
    return RankTimeline

def held_bytes(model, opt):
    "`rank_bytes`, with the buffers counted in the base: a plain model keeps its NF4 state in buffers, FSDP2 in parameters."
    from lorakit.fsdp import rank_bytes
    b = rank_bytes(model, opt)
    b['base'] += sum(t.numel()*t.element_size() for t in model.buffers())
    return b

def worker(a):
    "One rank (or the one plain process): load, train `a.steps` steps, the first `MEM_STEPS` tracked; write rankN.json into `a.result`."
    import warnings; warnings.filterwarnings('ignore')
    import torch.distributed as dist
    from lorakit.core import set_seed
    from lorakit.qlora import QuantSpec
    from lorakit.data import pydoc_docs, load_tokenizer, lm_data
    from lorakit.model import Llama
    from lorakit.inject import add_lora
    from lorakit.train import TrainConfig, Callback
    from lorakit.run import train
    from lorakit.memory import pick_loss, estimate_memory
    from lorakit.fsdp import init_distributed, load_sharded, Sharded, sharded_loss, grad_reduction, peak_rss_mib
    torch.set_num_threads(a.threads)
    cuda, sharded = a.device == 'cuda', a.worker == 'fsdp'
    d = checkpoint(a.model)
    cfg = json.loads((d/'config.json').read_text())
    dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float32
    tok = load_tokenizer(d, cfg['vocab_size'])
    data = lm_data(pydoc_docs(), tok, a.seq_len, seed=0, max_len=cfg['max_position_embeddings'])
    group, rank, world = None, 0, 1
    if sharded:
        group = Sharded(init_distributed(a.device))
        rank, world = group.rank, group.world
    rss0 = peak_rss_mib()
    set_seed(0)
    if sharded: model = load_sharded(d, group.mesh, dtype, QuantSpec.from_flag(a.quant), dict(LORA), seed=0)
    else:
        model = Llama.from_pretrained(d, dtype=dtype, device=a.device, quant=QuantSpec.from_flag(a.quant))
        add_lora(model, **LORA)
    rss1 = peak_rss_mib()
    loss = pick_loss(model, 'auto')
    loss_name = 'chunked' if type(loss).__name__ == 'ChunkedLMLoss' else 'plain'
    if sharded: loss = sharded_loss(loss, grad_reduction(group.mesh))
    rec = dict(rank=rank, world=world, threads=a.threads, rss_before_load=rss0, rss_load=rss1, loss=loss_name)

    class Probe(Callback):
        "The clock at each step's start; the tracker is open for the first MEM_STEPS steps and closed at the start of the next."
        def __init__(self): self.starts, self.tl = [], None
        def begin_fit(self, s):
            if cuda: torch.cuda.reset_peak_memory_stats(); return
            self.rss = vm('VmRSS'); reset_hwm()
            self.tl = timeline_class()(s.model, s.opt)
            self.tl.__enter__()
        def before_step(self, s):
            if self.tl is not None and s.step > MEM_STEPS: self.close()  # before the clock: closing takes a while
            if cuda: torch.cuda.synchronize()
            self.starts.append(time.perf_counter())
            if self.tl is not None: self.tl.before_step(s)
        def after_backward(self, s):
            if self.tl is not None: self.tl.after_backward(s)
        def after_step(self, s):
            if self.tl is not None: self.tl.after_step(s)
        def close(self):
            tl, self.tl = self.tl, None
            tl.__exit__(None, None, None)
            rec.update(peak=tl.peak, at_peak=tl.at_peak(), rss_steps=(vm('VmHWM') or 0) - (self.rss or 0))
        def end_fit(self, s):
            if self.tl is not None: self.close()
            rec['held'] = held_bytes(s.model, s.opt)

    probe = Probe()
    tc = TrainConfig(steps=a.steps, bs=a.bs, seq_len=a.seq_len, eval_every=a.steps, eval_batches=1, out=None, device=a.device)
    train(model, data, tc, progress=False, callbacks=[probe], loss_fn=loss, group=group)
    rec['step_times'] = [t1 - t0 for t0, t1 in zip(probe.starts, probe.starts[1:])][MEM_STEPS:]  # steps 3 .. steps-1
    if cuda:
        rec['peak'] = torch.cuda.max_memory_allocated()
        job = TrainConfig(quant=a.quant, r=LORA['r'], bs=a.bs // world, seq_len=a.seq_len, fsdp=sharded,
                          dtype='bf16' if dtype == torch.bfloat16 else 'float32', dropout=LORA['dropout'], loss=loss_name)
        rec['estimate'] = estimate_memory(job, d, world_size=world).peak
    Path(a.result, f'rank{rank}.json').write_text(json.dumps(rec))
    if sharded: dist.destroy_process_group()

# ---------------------------------------------------------------- parent side

def launch(a, which, kind, world=1, device='cpu'):
    "Run one configuration in fresh processes; return its ranks' records."
    bs, T, steps = a.size[which]
    with tempfile.TemporaryDirectory() as res:
        threads = max(1, a.threads // world)
        args = ['--worker', kind, '--model', which, '--quant', a.quant, '--bs', str(bs), '--seq-len', str(T),
                '--steps', str(steps), '--threads', str(threads), '--device', device, '--result', res]
        here = str(Path(__file__).resolve())
        cmd = ([sys.executable, '-m', 'torch.distributed.run', '--standalone', '--nproc_per_node', str(world), here] if kind == 'fsdp'
               else [sys.executable, here]) + args
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONWARNINGS='ignore')
        t = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if p.returncode:
            sys.stderr.write(p.stdout[-4000:] + p.stderr[-8000:])
            raise SystemExit(f"{' '.join(cmd)} failed (exit {p.returncode})")
        recs = sorted((json.loads(f.read_text()) for f in Path(res).glob('rank*.json')), key=lambda r: r['rank'])
    if len(recs) != world: raise SystemExit(f"expected {world} rank records from {kind} {which}, got {len(recs)}")
    at = lambda r: ', '.join(f"{k} {mib(v):.1f}" for k, v in r.get('at_peak', {}).items())
    print(f"  {which} {kind} ws={world} {device}: {time.perf_counter() - t:.0f} s; at the peak, MiB: "
          + '; '.join(f"rank {r['rank']}: {at(r)}" for r in recs), file=sys.stderr, flush=True)
    return recs

def row(model, name, recs, ref=None):
    "A table row: the largest rank's figures; the ratios are to `ref`, the world-size-1 figures (peak, held, step), where given."
    peak, step = max(r['peak'] for r in recs), statistics.median(t for r in recs for t in r['step_times'])
    h = max((r['held'] for r in recs), key=lambda h: sum(h.values())); held = sum(h.values())
    ratio = lambda v, i: f"{v / ref[i]:.2f}" if ref else '1.00' if name.startswith('fsdp') else ''
    load = ' / '.join(f"{r['rss_load']:.0f} (+{r['rss_load'] - r['rss_before_load']:.0f})" for r in recs)
    rss = ' / '.join(f"{r['rss_steps']:.0f}" for r in recs)
    cells = [model, name, f"{len(recs)} x {recs[0]['threads']}", f"{mib(peak):.1f}", ratio(peak, 0),
             f"{mib(held):.2f} ({mib(h['base']):.2f} + {mib(h['lora']):.2f} + {mib(h['optimizer']):.2f})", ratio(held, 1),
             f"{step:.3f}", ratio(step, 2), load, rss]
    return '| ' + ' | '.join(cells) + ' |', (peak, held, step)

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--quant', default='nf4', choices=('nf4', 'none'), help='the base in NF4 (QLoRA, default) or float32 (LoRA)')
    p.add_argument('--steps', type=int, default=None, help='steps a run, at least 4 (default: base 16, SmolLM2 8; --quick 6)')
    p.add_argument('--bs', type=int, default=None, help='rows of the global batch, a multiple of 2 (default: base 8, SmolLM2 4)')
    p.add_argument('--seq-len', type=int, default=None, help='tokens a row (default: base 128, SmolLM2 256)')
    p.add_argument('--models', default='base,smollm2', help='which: base, smollm2, or both')
    p.add_argument('--quick', action='store_true', help='the shipped base only, 6 steps: a smoke test')
    p.add_argument('--threads', type=int, default=len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else os.cpu_count(), help='threads in all, split evenly over the ranks (default: all cores)')
    for k in ('--worker', '--model', '--device', '--result'): p.add_argument(k, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker: return worker(a)
    t0 = time.perf_counter()
    models = ['base'] if a.quick else [m.strip() for m in a.models.split(',')]
    if bad := [m for m in models if m not in MODELS]: p.error(f"--models: unknown {bad[0]!r}, pick from {', '.join(MODELS)}")
    a.size = {m: (a.bs or SIZES[m][0], a.seq_len or SIZES[m][1], a.steps or (6 if a.quick else SIZES[m][2])) for m in models}
    for m, (bs, T, steps) in a.size.items():
        if bs % 2: p.error(f"--bs {bs} doesn't split over 2 ranks: use an even --bs")
        if steps < MEM_STEPS + 2: p.error(f"--steps {steps}: use at least {MEM_STEPS + 2} (2 tracked warm-up steps, then one timed, then the last)")
    for m in models: checkpoint(m)  # SmolLM2's one-time conversion happens here, not in the ranks
    print(f"# FSDP2 on CPU (gloo): {'QLoRA (NF4 base)' if a.quant == 'nf4' else 'LoRA (float32 base)'}, all-linear r 8, "
          f"float32, torch {torch.__version__}, {a.threads} threads split over the ranks\n", flush=True)
    out = ["| model | run | ranks x threads | peak tensor MiB / rank | / ws 1 | shards MiB / rank (base + LoRA + optimizer) | / ws 1 "
           "| step s (median) | / ws 1 | RSS at load MiB, per rank (rise) | RSS rise in steps 1-2 MiB, per rank |",
           "|---|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    notes, cuda_rows = [], []
    for m in models:
        bs, T, steps = a.size[m]
        ref = launch(a, m, 'ref')
        ws = {n: launch(a, m, 'fsdp', n) for n in (1, 2)}
        label = f"{MODELS[m]}, {bs} x {T}, {ref[0]['loss']} loss"
        l0, _ = row(label, 'single process, no FSDP', ref)
        l1, one = row('', 'fsdp ws 1', ws[1])
        l2, _ = row('', 'fsdp ws 2', ws[2], one)
        out += [l0, l1, l2]
        notes.append(f"{MODELS[m]}: {steps} steps, step time the median of {len(ref[0]['step_times'])} a run; "
                     f"the single process against fsdp ws 1: peak {ref[0]['peak'] / one[0]:.2f}x, step {statistics.median(ref[0]['step_times']) / one[2]:.2f}x")
        if torch.cuda.is_available(): cuda_rows.append((m, launch(a, m, 'fsdp', 1, 'cuda')[0]))
    print('\n'.join(out))
    print('\nThe per-rank columns show the largest rank (rss: rank 0 / rank 1). Ratios: fsdp ws 2 over fsdp ws 1; '
          f'ws 1 runs {a.threads} threads in one rank, ws 2 {max(1, a.threads // 2)} in each, the same cores in all. '
          'Peak tensor memory: MemoryTimeline with DTensors counted by their local shard and FSDP2\'s in-place storage resizes followed '
          '(the stock tracker counts a DTensor at its global size and never sees a gathered layer freed).')
    for n in notes: print(f"- {n}")
    if cuda_rows:
        print("\n## CUDA, world size 1, fully sharded: measured against estimate_memory\n")
        print("| model | bs x seq | max_memory_allocated MiB | estimate_memory peak MiB | estimate / measured |\n|---|---|---:|---:|---:|")
        for m, r in cuda_rows:
            bs, T, _ = a.size[m]
            print(f"| {MODELS[m]} | {bs} x {T} | {mib(r['peak']):.1f} | {mib(r['estimate']):.1f} | {r['estimate'] / r['peak']:.2f} |")
    else: print("\nCUDA row skipped: no GPU here (torch.cuda.is_available() is False).")
    print(f"bench/fsdp.py: {time.perf_counter() - t0:.0f} s", file=sys.stderr)

if __name__ == '__main__': main()
