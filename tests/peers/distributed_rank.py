"""One rank of tests/peers/distributed.sh, started by torchrun: a gloo process group on the CPU,
a tiny real diffusers StableDiffusionPipeline (tests/peers/diffusers_pipelines.py) with this
rank's own prompt, recorded by genscope.torch. The rank named by DISTRIBUTED_SLOW_RANK sleeps
DISTRIBUTED_SLOW_SECONDS in diffusers' callback_on_step_end after each denoising step, so its
sampling step is the one it slows. Under `genscope run --out DIR` the finished run is written
to DIR/ranks/rank<R>.json by genscope itself (GENSCOPE_RANK_RUN_DIR); this script writes
nothing but a line per rank.
"""
import os
import time

import torch
import torch.distributed as dist

import genscope
import genscope.torch
from diffusers_pipelines import sd15

PROMPTS = ["a red fox in the snow", "a lighthouse at dusk, oil painting"]


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    slow_rank = int(os.environ.get("DISTRIBUTED_SLOW_RANK", "1"))
    pause = float(os.environ.get("DISTRIBUTED_SLOW_SECONDS", "0.2")) if rank == slow_rank else 0.0
    steps = int(os.environ.get("DISTRIBUTED_STEPS", "4"))
    torch.set_num_threads(1)
    pipe = sd15()

    def callback(pipeline, i, t, kwargs):
        if pause:
            time.sleep(pause)
        return kwargs

    monitor = genscope.Monitor(sample_interval_ms=5, nvml=False)
    run = monitor.start_run(pipeline="text-to-image", model="tiny-sd15",
                            parameters={"prompt": PROMPTS[rank % len(PROMPTS)]})
    genscope.torch.barrier(run)  # every rank leaves it together: the merge aligns clocks on it
    with genscope.torch.instrument(pipe, run):
        pipe(prompt=PROMPTS[rank % len(PROMPTS)], num_inference_steps=steps, height=64, width=64,
             guidance_scale=5.0, generator=torch.Generator().manual_seed(rank),
             callback_on_step_end=callback)
    doc = run.finish()
    d = doc.get("distributed") or {}
    print(f"rank {rank}/{world}: run {doc['id'][:8]}, distributed {d}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
