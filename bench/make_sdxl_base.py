#!/usr/bin/python3
"""Writes a full-size SDXL base checkpoint and a LoRA over every weight ComfyUI patches in it,
for bench/lora_apply_e2e.sh.

Base (F16, ~6.9 GB like sd_xl_base_1.0.safetensors): the real key layout and shapes, generated
from the model structures with tests/data/layouts.py's builders (ldm UNet: 320
channels, levels [1, 2, 4], transformer depths 0/2/10, middle 10, context 2048, ADM 2816;
CLIP-L in HF layout and OpenCLIP-bigG resblocks with their 49,408-token embeddings) plus the
AutoencoderKL VAE at full width written out below. Values are a random F16
pool written cyclically: the merge's cost does not depend on them.

LoRA (kohya names, F16 factors, rank 16, alpha 8): a LoRA on every linear weight (LoCon on
every conv kernel, with its kernel on down) of the UNet, on every CLIP-L encoder projection
(lora_te1_) and every bigG one (lora_te2_; q/k/v land in chunks of in_proj_weight), and a
w_norm + b_norm pair (LyCORIS full) on every UNet norm layer.

usage: make_sdxl_base.py OUTDIR   -> OUTDIR/sdxl_base.safetensors, OUTDIR/sdxl_lora.safetensors
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data"))
import layouts  # noqa: E402  (layout builders: unet, clip_hf, open_clip)

VOCAB = 49408


def vae(prefix):
    """ldm AutoencoderKL (SD/SDXL): ch 128, ch_mult [1, 2, 4, 4], 2 res blocks, z 4."""
    keys = []
    conv = lambda n, cout, cin, k: keys.extend([(f"{n}.weight", (cout, cin, k, k)), (f"{n}.bias", (cout,))])
    norm = lambda n, c: keys.extend([(f"{n}.weight", (c,)), (f"{n}.bias", (c,))])

    def block(n, cin, cout):
        norm(f"{n}.norm1", cin)
        conv(f"{n}.conv1", cout, cin, 3)
        norm(f"{n}.norm2", cout)
        conv(f"{n}.conv2", cout, cout, 3)
        if cin != cout:
            conv(f"{n}.nin_shortcut", cout, cin, 1)

    def mid(n, c):
        block(f"{n}.block_1", c, c)
        norm(f"{n}.attn_1.norm", c)
        for p in ("q", "k", "v", "proj_out"):
            conv(f"{n}.attn_1.{p}", c, c, 1)
        block(f"{n}.block_2", c, c)

    mult = [1, 2, 4, 4]
    e = prefix + "encoder"
    conv(f"{e}.conv_in", 128, 3, 3)
    cin = 128
    for i, m in enumerate(mult):
        for j in range(2):
            block(f"{e}.down.{i}.block.{j}", cin, 128 * m)
            cin = 128 * m
        if i != len(mult) - 1:
            conv(f"{e}.down.{i}.downsample.conv", cin, cin, 3)
    mid(f"{e}.mid", 512)
    norm(f"{e}.norm_out", 512)
    conv(f"{e}.conv_out", 8, 512, 3)
    conv(prefix + "quant_conv", 8, 8, 1)
    conv(prefix + "post_quant_conv", 4, 4, 1)
    d = prefix + "decoder"
    conv(f"{d}.conv_in", 512, 4, 3)
    mid(f"{d}.mid", 512)
    cin = 512
    for i in reversed(range(len(mult))):
        for j in range(3):
            block(f"{d}.up.{i}.block.{j}", cin, 128 * mult[i])
            cin = 128 * mult[i]
        if i != 0:
            conv(f"{d}.up.{i}.upsample.conv", cin, cin, 3)
    norm(f"{d}.norm_out", 128)
    conv(f"{d}.conv_out", 3, 128, 3)
    return keys


def base_keys():
    u = layouts.unet(mc=320, mult=[1, 2, 4], nres=2, depth_in=[0, 2, 10], depth_mid=10,
                     depth_out=[0, 2, 10], ctx=2048, temb=1280, adm=2816, linear=True)
    keys = [("model.diffusion_model." + ldm, shape) for ldm, _, shape in u]
    for k, shape, *_ in layouts.clip_hf("conditioner.embedders.0.transformer.text_model.", 12, 768):
        keys.append((k, (VOCAB, 768) if k.endswith("token_embedding.weight") else shape))
    for k, shape, *_ in layouts.open_clip("conditioner.embedders.1.model.", 32, 1280):
        keys.append((k, (VOCAB, 1280) if k.endswith("token_embedding.weight") else shape))
    keys += vae("first_stage_model.")
    return keys


def write(path, tensors, pool):
    """tensors: [(name, shape)] written as F16 from the cyclic pool."""
    header, off, sizes = {}, 0, []
    for name, shape in tensors:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "F16", "shape": list(shape), "data_offsets": [off, off + n]}
        sizes.append(n)
        off += n
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    raw = pool.tobytes()
    pos = 0
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n in sizes:
            while n > 0:
                take = min(n, len(raw) - pos)
                f.write(raw[pos:pos + take])
                pos = (pos + take) % len(raw)
                n -= take
    return off


def lora_tensors(keys, rank=16):
    out, modules = [], 0
    te1 = "conditioner.embedders.0.transformer.text_model."
    te2 = "conditioner.embedders.1.model.transformer.resblocks."
    for k, shape in keys:
        if k.startswith("model.diffusion_model.") and k.endswith(".weight"):
            name = "lora_unet_" + k[len("model.diffusion_model."):-len(".weight")].replace(".", "_")
            if len(shape) >= 2:
                out += [(name + ".lora_down.weight", (rank,) + tuple(shape[1:])),
                        (name + ".lora_up.weight", (shape[0], rank) + (1,) * (len(shape) - 2)),
                        (name + ".alpha", ())]
            else:  # norm layers: LyCORIS full w_norm / b_norm
                out += [(name + ".w_norm", shape), (name + ".b_norm", shape)]
            modules += 1
        elif k.startswith(te1 + "encoder.layers.") and k.endswith(".weight") and "layer_norm" not in k:
            name = "lora_te1_text_model_" + k[len(te1):-len(".weight")].replace(".", "_")
            out += [(name + ".lora_down.weight", (rank, shape[1])), (name + ".lora_up.weight", (shape[0], rank)),
                    (name + ".alpha", ())]
            modules += 1
        elif k.startswith(te2) and k.endswith(("attn.in_proj_weight", "attn.out_proj.weight", "mlp.c_fc.weight",
                                               "mlp.c_proj.weight")):
            b = k[len(te2):].split(".")[0]
            p = f"lora_te2_text_model_encoder_layers_{b}_"
            d = shape[1]
            if k.endswith("in_proj_weight"):
                subs = [("self_attn_q_proj", d, d), ("self_attn_k_proj", d, d), ("self_attn_v_proj", d, d)]
            elif k.endswith("out_proj.weight"):
                subs = [("self_attn_out_proj", d, d)]
            elif k.endswith("c_fc.weight"):
                subs = [("mlp_fc1", shape[0], d)]
            else:
                subs = [("mlp_fc2", shape[0], d)]
            for sub, o, i in subs:
                out += [(p + sub + ".lora_down.weight", (rank, i)), (p + sub + ".lora_up.weight", (o, rank)),
                        (p + sub + ".alpha", ())]
                modules += 1
    return out, modules


def main(outdir):
    rng = np.random.default_rng(42)
    pool = (rng.standard_normal(1 << 22) * 0.05).astype(np.float16)
    keys = base_keys()
    size = write(f"{outdir}/sdxl_base.safetensors", keys, pool)
    lora, modules = lora_tensors(keys)
    # alpha 8 as F16 scalars would come from the pool: write the LoRA with a pool scaled for
    # factors, then patch every alpha to 8.0.
    small = (rng.standard_normal(1 << 20) * 0.02).astype(np.float16)
    write(f"{outdir}/sdxl_lora.safetensors", lora, small)
    with open(f"{outdir}/sdxl_lora.safetensors", "r+b") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        for name, e in header.items():
            if name.endswith(".alpha"):
                f.seek(8 + n + e["data_offsets"][0])
                f.write(np.float16(8.0).tobytes())
    print(json.dumps({"base_tensors": len(keys), "base_bytes": size, "lora_modules": modules,
                      "lora_tensors": len(lora)}))


if __name__ == "__main__":
    main(sys.argv[1])
