#!/usr/bin/python3
"""make_tiny_sd15_lora.py OUT.safetensors: a rank-4 kohya-style LoRA on SD1.5 keys (one UNet
attention projection and one CLIP text-encoder projection), seeded, standard library + numpy."""
import json
import struct
import sys

import numpy as np

TARGETS = {  # kohya name -> (out, in) of the patched weight
    "lora_unet_down_blocks_0_attentions_0_transformer_blocks_0_attn1_to_q": (320, 320),
    "lora_unet_mid_block_attentions_0_transformer_blocks_0_attn2_to_k": (1280, 768),
    "lora_te_text_model_encoder_layers_0_self_attn_q_proj": (768, 768),
}


def main(path, rank=4):
    rng = np.random.default_rng(7)
    tensors = {}
    for name, (out_f, in_f) in TARGETS.items():
        tensors[name + ".lora_down.weight"] = rng.normal(0, 0.02, (rank, in_f)).astype(np.float32)
        tensors[name + ".lora_up.weight"] = rng.normal(0, 0.02, (out_f, rank)).astype(np.float32)
        tensors[name + ".alpha"] = np.array(float(rank), dtype=np.float32)
    header, offset, blobs = {}, 0, []
    for key in sorted(tensors):
        data = tensors[key].tobytes()
        header[key] = {"dtype": "F32", "shape": list(tensors[key].shape),
                       "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    header["__metadata__"] = {"ss_network_dim": str(rank), "genscope": "tiny test LoRA"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


if __name__ == "__main__":
    main(sys.argv[1])
