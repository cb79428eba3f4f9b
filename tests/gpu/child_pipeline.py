"""A CUDA pipeline run under `genscope run` by check_run_command.py (not a test by itself).

    python3 child_pipeline.py SYNC_DIR

Loads "weights" (512 MiB on the GPU), then samples: 1 GiB of activations and 20 small
iterations, then holds everything until the checker, having read nvidia-smi, creates
SYNC_DIR/go. It writes SYNC_DIR/ready with its pid when holding. When genscope gives it an
event channel (GENSCOPE_EVENTS_FD, docs/run.md), it announces its steps there, as any
program watched by `genscope run` may.
"""

import json
import os
import sys
import time

import torch

MIB = 1 << 20


def events():
    fd = os.environ.get("GENSCOPE_EVENTS_FD")
    if not fd:
        return None
    try:
        return os.fdopen(int(fd), "w", buffering=1)
    except (OSError, ValueError):
        return None


def emit(channel, **event):
    if channel is not None:
        channel.write(json.dumps(event) + "\n")


def main():
    sync = sys.argv[1]
    channel = events()
    device = torch.device("cuda", torch.cuda.current_device())
    emit(channel, event="begin", kind="model_loading", name="load weights")
    weights = torch.empty(512 * MIB, dtype=torch.uint8, device=device)
    weights.fill_(1)
    torch.cuda.synchronize()
    emit(channel, event="end", name="load weights")
    emit(channel, event="begin", kind="sampling", name="denoise")
    activations = torch.empty(1024 * MIB, dtype=torch.uint8, device=device)
    activations.fill_(2)
    x = torch.randn(512, 512, device=device)
    for _ in range(20):
        x = torch.tanh(x @ x.T / 512)
        emit(channel, event="iteration")
    torch.cuda.synchronize()
    with open(os.path.join(sync, "ready.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.path.join(sync, "ready.tmp"), os.path.join(sync, "ready"))
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(sync, "go")) and time.monotonic() < deadline:
        time.sleep(0.02)
    emit(channel, event="end", name="denoise")
    del activations, weights, x
    torch.cuda.synchronize()
    print("child pipeline done", flush=True)


if __name__ == "__main__":
    main()
