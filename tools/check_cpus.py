#!/usr/bin/env python
"""Check lorakit's NF4 dequantize paths on two kinds of CPU: this machine's, and one without AVX-512.

    python tools/check_cpus.py

bitsandbytes' CPU kernels take different code paths on AVX-512 and AVX2 machines, and have given different
values on them (03_nf4's forensics). A test suite run on one machine checks only that machine's path. So this
runs `lorakit.qlora.assert_dequantize_paths`, and `assert_gemv_paths` (the AVX2 kernel sampling multiplies
NF4 codes by), and says which dtype `--dtype auto` picks there (`fast_bf16`), twice: natively, and under QEMU's user-mode emulator on an emulated AMD EPYC-Rome, which
has AVX2 and no AVX-512 (Debian's `qemu-user` package; the emulated run takes a couple of minutes). On a machine that has no AVX-512 itself, both runs are AVX2 runs. Without qemu-x86_64,
or on a CPU that isn't x86-64, it says it skipped the emulated run.
"""
import os, platform, shutil, subprocess, sys

CHECK = ("import torch; from lorakit.qlora import assert_dequantize_paths as c; "
         "from lorakit.gemv import assert_gemv_paths as g; from lorakit.core import fast_bf16; "
         "n, e = c(), g(); print(f'{torch.backends.cpu.get_cpu_capability()}: {n} dequantize cases, every path "
         "exact; ' + (f'{len(e)} cases of the NF4 sampling kernel within float32 rounding' if e else "
         "'the NF4 sampling kernel not built here (no AVX2 or no C compiler): layers hold dense weights') "
         "+ '; --dtype auto: ' + ('bf16, ' if fast_bf16()[0] else 'float32, ') + fast_bf16()[1])")
CPU = 'EPYC-Rome-v2'  # x86-64 with AVX2, FMA and F16C, and no AVX-512: what PyTorch's AVX2 build needs

def run(cmd:list)->bool:
    r = subprocess.run(cmd, capture_output=True, text=True)
    lines = [l for l in (r.stdout + r.stderr).splitlines() if 'TCG doesn' not in l and 'kernels' not in l]
    print('\n'.join(f'check_cpus: {l}' for l in lines[-12:]))
    return r.returncode == 0

def main()->int:
    ok = run([sys.executable, '-c', CHECK])
    qemu = shutil.which('qemu-x86_64')
    if platform.machine() != 'x86_64' or qemu is None:
        print('check_cpus: SKIPPED the emulated CPU without AVX-512: needs qemu-x86_64 '
              '(apt-get install qemu-user) on an x86-64 machine')
    else: ok = run([qemu, '-cpu', CPU, sys.executable, '-c', CHECK]) and ok
    print(f"check_cpus: {'all passed' if ok else 'FAILED'}")
    return 0 if ok else 1

if __name__ == '__main__': sys.exit(main())
