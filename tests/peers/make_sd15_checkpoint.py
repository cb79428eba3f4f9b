#!/usr/bin/python3
"""make_sd15_checkpoint.py OUT.safetensors: a Stable Diffusion 1.5 single-file checkpoint of real
size and layout with random weights, for the peer tests that run a real program on it (ComfyUI's
CheckpointLoaderSimple detects it as SD1.5). The layout is tests/data/layouts.py's at SD1.5's
widths: the ldm UNet (model channels 320, context 768), CLIP-L (12 layers, 768 wide, the 49408
token vocabulary, int64 position_ids) and the AutoencoderKL (128 channels): 1131 tensors,
float16, about 2.1 GB. Weights N(0, 0.02) from a fixed seed; normalisation layers 1 (weights)
and 0 (biases) so that the pictures are noise but finite. Standard library + NumPy; skips the
work when OUT exists with the size it would have (a rewrite goes through OUT.tmp)."""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import layouts  # noqa: E402


def tensors():
    """(name, shape, dtype) in file order."""
    unet = layouts.unet(mc=320, mult=[1, 2, 4, 4], nres=2, depth_in=[1, 1, 1, 0], depth_mid=1,
                        depth_out=[1, 1, 1, 0], ctx=768, temb=1280, adm=0, linear=False)
    out = [("model.diffusion_model." + name, tuple(shape), "F16") for name, _, shape in unet]
    for k in layouts.clip_hf("cond_stage_model.transformer.text_model.", 12, 768, position_ids=True, vocab=49408):
        out.append((k[0], tuple(k[1]), "I64" if len(k) > 2 else "F16"))
    out += [(k[0], tuple(k[1]), "F16") for k in layouts.vae("first_stage_model.", ch=128)]
    return out


def main(path):
    entries, header, offset = tensors(), {"__metadata__": {"format": "pt"}}, 0
    for name, shape, dtype in entries:
        size = int(np.prod(shape)) * (8 if dtype == "I64" else 2)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    total = 8 + len(head) + offset
    if os.path.exists(path) and os.path.getsize(path) == total:
        return
    rng = np.random.default_rng(15)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head)
        for name, shape, dtype in entries:
            if dtype == "I64":
                a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
            elif len(shape) == 1 and ("norm" in name or ".ln_" in name):
                a = (np.ones if name.endswith(".weight") else np.zeros)(shape, dtype=np.float16)
            else:
                a = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16)
            f.write(a.tobytes())
    os.replace(path + ".tmp", path)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_sd15_checkpoint.py OUT.safetensors")
    main(sys.argv[1])
