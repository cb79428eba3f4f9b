"""genscope: monitoring and validation of generative diffusion pipelines.

The classes come from the native extension ``genscope._genscope``::

    import genscope
    monitor = genscope.Monitor()
    run = monitor.start_run(pipeline="t2i", model="sdxl-base")
    with run.step("sampling", "denoise") as step:
        for t in timesteps:
            ...
            step.mark_iteration()
    doc = run.finish()
    print(genscope.render_report(doc))

See docs/python.md for the full reference.
"""

from ._genscope import (  # noqa: F401
    Attempt,
    Error,
    Monitor,
    Run,
    Step,
    __version__,
    read_run,
    render_report,
    write_run,
)

STEP_KINDS = (
    "model_loading",
    "lora_application",
    "text_encoding",
    "latent_generation",
    "sampling",
    "vae_decode",
    "save",
    "custom",
)
"""The step kinds accepted by Run.step()."""

TENSOR_ROLES = ("conditioning", "pooled", "latent", "image", "other")
"""The roles accepted by Step.analyze_tensor()."""

__all__ = [
    "Attempt",
    "Error",
    "Monitor",
    "Run",
    "Step",
    "STEP_KINDS",
    "TENSOR_ROLES",
    "read_run",
    "render_report",
    "write_run",
]
