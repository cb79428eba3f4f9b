#!/usr/bin/python3
"""A diffusers-style text-to-image loop monitored by genscope, runnable without a GPU.

    PYTHONPATH=build/python /usr/bin/python3 python/examples/monitor_loop.py [run.json]

NumPy stands in for the models: the "text encoder" returns a (1, 77, 2048) SDXL context,
the "UNet" updates a (1, 4, 128, 128) latent for 20 steps and the "VAE" decodes with a
fallback chain. With torch and a GPU, pass torch tensors instead: analyze_tensor copies them
to the host and says so, and monitor.add_torch_cuda_allocator() adds exact VRAM peaks.
"""

import sys

import numpy as np

import genscope


def main(path=None):
    monitor = genscope.Monitor(sample_interval_ms=5)
    try:  # exact CUDA allocator peaks when torch with CUDA is available
        import torch

        if torch.cuda.is_available():
            monitor.add_torch_cuda_allocator(device=0)
    except ImportError:
        pass

    rng = np.random.default_rng(0)
    run = monitor.start_run(pipeline="text-to-image", model="sdxl-base-1.0",
                            architecture="UNet",
                            parameters={"resolution": "1024x1024", "steps": 20, "seed": 0})

    with run.step("model_loading", "load unet") as step:
        weights = rng.standard_normal((64, 1024, 1024), dtype=np.float32)  # 256 MiB
        step.add_counter("bytes", weights.nbytes)

    with run.step("text_encoding", "encode prompt") as step:
        context = rng.standard_normal((1, 77, 2048), dtype=np.float32)
        pooled = rng.standard_normal((1, 1280), dtype=np.float32)
        step.add_counter("tokens", 77)
        step.analyze_tensor("positive", context, "conditioning", family="sdxl",
                            pooled_shape=pooled.shape)

    with run.step("latent_generation", "initial noise") as step:
        latent = rng.standard_normal((1, 4, 128, 128), dtype=np.float32)
        step.analyze_tensor("noise", latent, "latent", family="sdxl", source=(1024, 1024))

    with run.step("sampling", "denoise") as step:
        step.begin_iterations()
        for t in range(20):
            noise_pred = np.tanh(latent) * 0.1  # the "UNet"
            latent = latent - noise_pred
            step.mark_iteration()
        step.analyze_tensor("denoised", latent, "latent", family="sdxl", source=(1024, 1024))

    with run.step("vae_decode", "decode") as step:
        with step.attempt("direct"):
            raise MemoryError("CUDA out of memory (simulated)")
        with step.attempt("tiled") as tiled:
            image = np.clip(np.repeat(np.repeat(latent[:, :3], 8, 2), 8, 3), -1, 1)
        if not tiled.ok:
            step.fail("every VAE strategy failed")
        step.add_counter("items", 1)

    doc = run.finish()
    print(genscope.render_report(doc, plain=True))
    if path:
        genscope.write_run(doc, path)
        print(f"run document written to {path} (genscope report {path})")
    return image


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
