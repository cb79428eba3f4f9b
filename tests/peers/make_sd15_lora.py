#!/usr/bin/python3
"""make_sd15_lora.py OUT.safetensors: a small kohya-style SD1.5 LoRA (random, rank 4, fixed
seed) that ComfyUI's LoraLoader and stable-diffusion.cpp's <lora:NAME:1> both apply: 19
modules (UNet attention projections and CLIP text-encoder projections) x (lora_down, lora_up,
alpha) = 57 tensors. Standard library + NumPy; skips the work when OUT exists."""
import json
import os
import struct
import sys

import numpy as np

RANK = 4
UNET = "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_"
MODULES = (
    [(UNET + f"attn1_to_{p}", 320, 320) for p in ("q", "k", "v")]
    + [(UNET + "attn1_to_out_0", 320, 320), (UNET + "attn2_to_q", 320, 320),
       (UNET + "attn2_to_k", 768, 320), (UNET + "attn2_to_v", 768, 320),
       (UNET + "attn2_to_out_0", 320, 320), (UNET + "ff_net_2", 1280, 320)]
    + [(f"lora_te_text_model_encoder_layers_{i}_self_attn_{p}_proj", 768, 768)
       for i in (0, 1) for p in ("q", "k", "v", "out")]
    + [("lora_te_text_model_encoder_layers_0_mlp_fc1", 768, 3072),
       ("lora_te_text_model_encoder_layers_0_mlp_fc2", 3072, 768)])


def main(out):
    if os.path.exists(out):
        return
    rng = np.random.default_rng(7)
    tensors = {}
    for name, n_in, n_out in MODULES:
        tensors[name + ".lora_down.weight"] = (rng.standard_normal((RANK, n_in)) * 0.01).astype(np.float16)
        tensors[name + ".lora_up.weight"] = (rng.standard_normal((n_out, RANK)) * 0.01).astype(np.float16)
        tensors[name + ".alpha"] = np.array(float(RANK), dtype=np.float16)
    header, blobs, offset = {"__metadata__": {"ss_network_dim": str(RANK)}}, [], 0
    for k in sorted(tensors):
        b = tensors[k].tobytes()
        header[k] = {"dtype": "F16", "shape": list(tensors[k].shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    os.replace(tmp, out)


if __name__ == "__main__":
    main(sys.argv[1])
