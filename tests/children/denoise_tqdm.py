#!/usr/bin/env python3
"""A small denoising loop with a tqdm bar, as a real child program for `genscope run`'s tests.

Uses Debian's python3-torch and python3-tqdm. The bar (desc "denoise", STEPS iterations, tqdm's
default 0.1 s redraw interval, so not every iteration is drawn) is on stderr. Inside iteration
SPIKE_AT it allocates and touches SPIKE_MIB MiB (a float32 tensor) and frees it at once: a spike
that lives a few milliseconds. At the end it prints its own ru_maxrss, which is what
`/usr/bin/time -v` would report for it.

A second bar ("decode", DECODE_STEPS iterations, no spike) follows when DECODE_STEPS > 0: a
later step whose start resets the kernel's high-water mark, which lowers that ru_maxrss.

    denoise_tqdm.py [STEPS] [SPIKE_MIB] [SPIKE_AT] [STEP_SECONDS] [DECODE_STEPS]
"""
import resource
import sys
import time

import torch
from tqdm import tqdm

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
spike_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 96
spike_at = int(sys.argv[3]) if len(sys.argv) > 3 else steps // 2
step_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.02
decode_steps = int(sys.argv[5]) if len(sys.argv) > 5 else 0

torch.manual_seed(0)
torch.set_num_threads(1)
latents = torch.randn(1, 4, 32, 32)
for i in tqdm(range(steps), desc="denoise"):
    noise_pred = torch.tanh(latents) * 0.1
    latents = latents - noise_pred
    if i == spike_at:
        spike = torch.ones(spike_mib * 1024 * 1024 // 4, dtype=torch.float32)
        spike.add_(1.0)  # touched, so resident
        del spike
    time.sleep(step_seconds)
for _ in tqdm(range(decode_steps), desc="decode"):
    latents = latents * 0.5
    time.sleep(step_seconds)
print(f"checksum {float(latents.sum()):.6f}")
print(f"maxrss_kib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
