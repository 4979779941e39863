"Timing shared by the bench scripts: lorakit and a reference, run in alternation, medians over repeats."
import statistics, time
import torch

def _sync(dev):
    if dev.type == 'cuda': torch.cuda.synchronize()

def _time(fn, dev):
    _sync(dev); t = time.perf_counter(); fn(); _sync(dev)
    return time.perf_counter() - t

def bench(cases, reps, dev):
    "Median seconds of each (name, lorakit fn, reference fn) case, after a warm-up, the two timed in alternation."
    rows = []
    for name, ours, ref in cases:
        ours(); ref()
        to, tr = [], []
        for _ in range(reps): to.append(_time(ours, dev)); tr.append(_time(ref, dev))
        rows.append((name, statistics.median(to), statistics.median(tr)))
    return rows

def table(rows, ref_name):
    "A markdown table of `bench` rows with the lorakit / reference ratio."
    out = [f"| case | lorakit ms | {ref_name} ms | lorakit / {ref_name} |", "|---|---:|---:|---:|"]
    out += [f"| {name} | {to*1e3:.1f} | {tr*1e3:.1f} | {to/tr:.2f} |" for name, to, tr in rows]
    return '\n'.join(out)
