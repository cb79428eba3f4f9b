"""genscope: monitoring and validation of generative diffusion pipelines.

A PyTorch pipeline (diffusers, ComfyUI, your own) is instrumented in one line::

    import genscope, genscope.torch
    monitor = genscope.Monitor()
    run = monitor.start_run(pipeline="t2i", model="sdxl-base")
    with genscope.torch.instrument(pipe, run):
        image = pipe(prompt).images[0]
    print(genscope.render_report(run.finish()))

Steps can also be placed by hand; the classes come from the native extension
``genscope._genscope`` (``__version__`` is the C++ library's version)::

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
    distributed_from_environment,
    read_run,
    render_html,
    render_metrics,
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



def __getattr__(name: str):
    """``genscope.torch`` is imported on first use, so ``import genscope`` never loads torch."""
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Attempt",
    "Error",
    "Monitor",
    "Run",
    "Step",
    "STEP_KINDS",
    "TENSOR_ROLES",
    "distributed_from_environment",
    "read_run",
    "render_html",
    "render_metrics",
    "render_report",
    "write_run",
    "__version__",
]
