"""genscope.torch: one-line instrumentation of PyTorch diffusion pipelines.

    import genscope, genscope.torch

    monitor = genscope.Monitor()            # torch.cuda's allocator probe attached by itself
    run = monitor.start_run(pipeline="t2i", model="sdxl")
    with genscope.torch.instrument(pipe, run):
        image = pipe(prompt).images[0]
    print(genscope.render_report(run.finish()))

- instrument(pipe, run): text_encoding / sampling / latent_generation / vae_decode steps,
  iterations, model evaluations and tensor analyses, by hooks removed on exit;
- step_callback(step): iterations of a loop the user drives (diffusers callback_on_step_end);
- mark_distributed(run) / barrier(run): the run's rank from an initialised torch.distributed
  process group (instrument() calls it), and a barrier step the merge aligns clocks on;
- load_step(run, name, path=None): a model_loading step counting what was created inside;
- observe_patching(run, before, after) / lora_step(run, model): seed 002's LoRA report.

See docs/python.md.
"""

from ._callback import StepCallback, step_callback
from ._components import Components, find_components
from ._distributed import barrier, distributed_info, mark_distributed
from ._instrument import Instrumentation, instrument
from ._loading import LoadStep, load_step
from ._patching import LoraStep, lora_step, observe_patching, patch_analysis, snapshot

__all__ = [
    "Components",
    "barrier",
    "distributed_info",
    "Instrumentation",
    "LoadStep",
    "LoraStep",
    "StepCallback",
    "find_components",
    "instrument",
    "load_step",
    "mark_distributed",
    "lora_step",
    "observe_patching",
    "patch_analysis",
    "snapshot",
    "step_callback",
]
