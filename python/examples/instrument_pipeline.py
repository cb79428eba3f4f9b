#!/usr/bin/python3
"""genscope.torch on a small real PyTorch pipeline (CPU), runnable without a GPU or downloads.

    /usr/bin/python3 python/examples/instrument_pipeline.py [run.json]

The pipeline (python/tests/tiny_pipeline.py) is laid out like a diffusers one: tokenizers,
two text encoders, a UNet, a DDIM scheduler and a VAE. Loading is a load_step, the
generation is instrumented with one line; the report is printed and the run written.
"""

import os
import sys

import genscope
import genscope.torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from tiny_pipeline import TinyPipeline  # noqa: E402


def main(path=None):
    monitor = genscope.Monitor()
    run = monitor.start_run(pipeline="text-to-image", model="tiny (SDXL layout)",
                            parameters={"resolution": "128x128", "steps": 10})
    with genscope.torch.load_step(run, "pipeline"):
        pipe = TinyPipeline(dual=True)
    with genscope.torch.instrument(pipe, run):
        image = pipe("a red fox in the snow", "blurry", num_inference_steps=10,
                     height=128, width=128)
    doc = run.finish()
    print(genscope.render_report(doc, plain=True))
    print("image", tuple(image.shape), "usage", monitor.usage_statistics())
    if path:
        genscope.write_run(doc, path)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
