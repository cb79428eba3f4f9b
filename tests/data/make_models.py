#!/usr/bin/python3
"""Writes tiny checkpoints and LoRAs with the real key layouts of SD1.5 and SDXL (ldm and
diffusers naming), LoRAs in kohya / PEFT / LoHa / LoKr form, broken LoRAs, and the NumPy
reference of every merge the tests check (expected_*.safetensors).

usage: make_models.py OUTDIR        (fixed seeds: the output is deterministic)
"""
import json
import os
import struct
import sys

import numpy as np

# ---------------------------------------------------------------- safetensors by hand ----
def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (as genscope and PyTorch do)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return r


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class BF16:
    """A bfloat16 tensor held as its bits."""
    def __init__(self, bits):
        self.bits = bits


def write_safetensors(path, tensors, metadata=None):
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, arr in tensors.items():
        if isinstance(arr, BF16):
            dtype, data, shape = "BF16", arr.bits.tobytes(), list(arr.bits.shape)
        else:
            dtype = {np.float32: "F32", np.float16: "F16"}[arr.dtype.type]
            data, shape = np.ascontiguousarray(arr).tobytes(), list(arr.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def as_f32(arr):
    return bf16_to_f32(arr.bits) if isinstance(arr, BF16) else arr.astype(np.float32)


def cast_like(ref, value):
    if isinstance(ref, BF16):
        return BF16(bf16_bits(value))
    return value.astype(ref.dtype)

# ---------------------------------------------------------------- UNet structure ---------
RESNET = [("in_layers.0", "norm1"), ("in_layers.2", "conv1"), ("emb_layers.1", "time_emb_proj"),
          ("out_layers.0", "norm2"), ("out_layers.3", "conv2"), ("skip_connection", "conv_shortcut")]


class Builder:
    def __init__(self, rng):
        self.rng = rng
        self.keys = []  # (ldm, diffusers, shape)

    def add(self, ldm, dif, shape):
        self.keys.append((ldm, dif, tuple(shape)))

    def resnet(self, ldm, dif, cin, cout, temb):
        shapes = {"in_layers.0": [(cin,), (cin,)], "in_layers.2": [(cout, cin, 3, 3), (cout,)],
                  "emb_layers.1": [(cout, temb), (cout,)], "out_layers.0": [(cout,), (cout,)],
                  "out_layers.3": [(cout, cout, 3, 3), (cout,)], "skip_connection": [(cout, cin, 1, 1), (cout,)]}
        for l, d in RESNET:
            if l == "skip_connection" and cin == cout:
                continue
            w, b = shapes[l]
            self.add(f"{ldm}.{l}.weight", f"{dif}.{d}.weight", w)
            self.add(f"{ldm}.{l}.bias", f"{dif}.{d}.bias", b)

    def transformer(self, ldm, dif, c, ctx, depth, linear):
        self.add(f"{ldm}.norm.weight", f"{dif}.norm.weight", (c,))
        self.add(f"{ldm}.norm.bias", f"{dif}.norm.bias", (c,))
        proj = (c, c) if linear else (c, c, 1, 1)
        for p in ("proj_in", "proj_out"):
            self.add(f"{ldm}.{p}.weight", f"{dif}.{p}.weight", proj)
            self.add(f"{ldm}.{p}.bias", f"{dif}.{p}.bias", (c,))
        for t in range(depth):
            lt, dt = f"{ldm}.transformer_blocks.{t}", f"{dif}.transformer_blocks.{t}"
            for a, kv in (("attn1", c), ("attn2", ctx)):
                self.add(f"{lt}.{a}.to_q.weight", f"{dt}.{a}.to_q.weight", (c, c))
                self.add(f"{lt}.{a}.to_k.weight", f"{dt}.{a}.to_k.weight", (c, kv))
                self.add(f"{lt}.{a}.to_v.weight", f"{dt}.{a}.to_v.weight", (c, kv))
                self.add(f"{lt}.{a}.to_out.0.weight", f"{dt}.{a}.to_out.0.weight", (c, c))
                self.add(f"{lt}.{a}.to_out.0.bias", f"{dt}.{a}.to_out.0.bias", (c,))
            for n in ("norm1", "norm2", "norm3"):
                self.add(f"{lt}.{n}.weight", f"{dt}.{n}.weight", (c,))
                self.add(f"{lt}.{n}.bias", f"{dt}.{n}.bias", (c,))
            self.add(f"{lt}.ff.net.0.proj.weight", f"{dt}.ff.net.0.proj.weight", (8 * c, c))
            self.add(f"{lt}.ff.net.0.proj.bias", f"{dt}.ff.net.0.proj.bias", (8 * c,))
            self.add(f"{lt}.ff.net.2.weight", f"{dt}.ff.net.2.weight", (c, 4 * c))
            self.add(f"{lt}.ff.net.2.bias", f"{dt}.ff.net.2.bias", (c,))


def unet(rng, mc, mult, nres, depth_in, depth_mid, depth_out, ctx, temb, adm, linear):
    """depth_in[level], depth_out[level]: transformer depth of that level's blocks."""
    b = Builder(rng)
    b.add("time_embed.0.weight", "time_embedding.linear_1.weight", (temb, mc))
    b.add("time_embed.0.bias", "time_embedding.linear_1.bias", (temb,))
    b.add("time_embed.2.weight", "time_embedding.linear_2.weight", (temb, temb))
    b.add("time_embed.2.bias", "time_embedding.linear_2.bias", (temb,))
    if adm:
        b.add("label_emb.0.0.weight", "add_embedding.linear_1.weight", (temb, adm))
        b.add("label_emb.0.0.bias", "add_embedding.linear_1.bias", (temb,))
        b.add("label_emb.0.2.weight", "add_embedding.linear_2.weight", (temb, temb))
        b.add("label_emb.0.2.bias", "add_embedding.linear_2.bias", (temb,))
    b.add("input_blocks.0.0.weight", "conv_in.weight", (mc, 4, 3, 3))
    b.add("input_blocks.0.0.bias", "conv_in.bias", (mc,))
    ch, n, skips = mc, 1, [mc]
    for x, m in enumerate(mult):
        for i in range(nres):
            b.resnet(f"input_blocks.{n}.0", f"down_blocks.{x}.resnets.{i}", ch, m * mc, temb)
            ch = m * mc
            if depth_in[x]:
                b.transformer(f"input_blocks.{n}.1", f"down_blocks.{x}.attentions.{i}", ch, ctx, depth_in[x], linear)
            skips.append(ch)
            n += 1
        if x != len(mult) - 1:
            b.add(f"input_blocks.{n}.0.op.weight", f"down_blocks.{x}.downsamplers.0.conv.weight", (ch, ch, 3, 3))
            b.add(f"input_blocks.{n}.0.op.bias", f"down_blocks.{x}.downsamplers.0.conv.bias", (ch,))
            skips.append(ch)
            n += 1
    b.resnet("middle_block.0", "mid_block.resnets.0", ch, ch, temb)
    b.transformer("middle_block.1", "mid_block.attentions.0", ch, ctx, depth_mid, linear)
    b.resnet("middle_block.2", "mid_block.resnets.1", ch, ch, temb)
    n = 0
    for x, m in enumerate(reversed(mult)):
        level = len(mult) - 1 - x
        for i in range(nres + 1):
            b.resnet(f"output_blocks.{n}.0", f"up_blocks.{x}.resnets.{i}", ch + skips.pop(), m * mc, temb)
            ch = m * mc
            c = 1
            if depth_out[level]:
                b.transformer(f"output_blocks.{n}.1", f"up_blocks.{x}.attentions.{i}", ch, ctx, depth_out[level], linear)
                c = 2
            if level != 0 and i == nres:
                b.add(f"output_blocks.{n}.{c}.conv.weight", f"up_blocks.{x}.upsamplers.0.conv.weight", (ch, ch, 3, 3))
                b.add(f"output_blocks.{n}.{c}.conv.bias", f"up_blocks.{x}.upsamplers.0.conv.bias", (ch,))
            n += 1
    b.add("out.0.weight", "conv_norm_out.weight", (mc,))
    b.add("out.0.bias", "conv_norm_out.bias", (mc,))
    b.add("out.2.weight", "conv_out.weight", (4, mc, 3, 3))
    b.add("out.2.bias", "conv_out.bias", (4,))
    return b.keys


CLIP_SUB = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "mlp.fc1", "mlp.fc2"]


def clip_hf(prefix, layers, d):
    out = [(f"{prefix}embeddings.token_embedding.weight", (64, d)),
           (f"{prefix}embeddings.position_embedding.weight", (77, d)),
           (f"{prefix}final_layer_norm.weight", (d,)), (f"{prefix}final_layer_norm.bias", (d,))]
    for l in range(layers):
        p = f"{prefix}encoder.layers.{l}."
        for s in CLIP_SUB[:4]:
            out += [(p + s + ".weight", (d, d)), (p + s + ".bias", (d,))]
        out += [(p + "mlp.fc1.weight", (4 * d, d)), (p + "mlp.fc1.bias", (4 * d,)),
                (p + "mlp.fc2.weight", (d, 4 * d)), (p + "mlp.fc2.bias", (d,))]
        for n in ("layer_norm1", "layer_norm2"):
            out += [(p + n + ".weight", (d,)), (p + n + ".bias", (d,))]
    return out


def open_clip(prefix, layers, d):
    out = [(f"{prefix}token_embedding.weight", (64, d)), (f"{prefix}positional_embedding", (77, d)),
           (f"{prefix}ln_final.weight", (d,)), (f"{prefix}ln_final.bias", (d,)), (f"{prefix}text_projection", (d, d))]
    for l in range(layers):
        p = f"{prefix}transformer.resblocks.{l}."
        out += [(p + "attn.in_proj_weight", (3 * d, d)), (p + "attn.in_proj_bias", (3 * d,)),
                (p + "attn.out_proj.weight", (d, d)), (p + "attn.out_proj.bias", (d,)),
                (p + "mlp.c_fc.weight", (4 * d, d)), (p + "mlp.c_fc.bias", (4 * d,)),
                (p + "mlp.c_proj.weight", (d, 4 * d)), (p + "mlp.c_proj.bias", (d,))]
        for n in ("ln_1", "ln_2"):
            out += [(p + n + ".weight", (d,)), (p + n + ".bias", (d,))]
    return out


def values(rng, keys, dtype):
    out = {}
    for k, shape in keys:
        v = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        out[k] = BF16(bf16_bits(v)) if dtype == "bf16" else v.astype(dtype)
    return out

# ---------------------------------------------------------------- models -----------------
SD15 = dict(mc=8, mult=[1, 2, 4, 4], nres=2, depth_in=[1, 1, 1, 0], depth_mid=1, depth_out=[1, 1, 1, 0],
            ctx=12, temb=16, adm=0, linear=False)
SDXL = dict(mc=12, mult=[1, 2, 4], nres=2, depth_in=[0, 2, 10], depth_mid=10, depth_out=[0, 2, 10],
            ctx=20, temb=24, adm=32, linear=True)


def lora_pair(rng, shape, rank, conv_kernel=False):
    """(down, up) for a weight of `shape`; conv weights keep their kernel on down."""
    out_dim = shape[0]
    if len(shape) == 4:
        down = (rng.standard_normal((rank, shape[1], shape[2], shape[3])) * 0.2).astype(np.float32)
        up = (rng.standard_normal((out_dim, rank, 1, 1)) * 0.2).astype(np.float32)
    else:
        down = (rng.standard_normal((rank, shape[1])) * 0.2).astype(np.float32)
        up = (rng.standard_normal((out_dim, rank)) * 0.2).astype(np.float32)
    return down, up


def merge(base, patches, strength):
    """patches: list of (key, delta_f32 reshaped to weight shape or (chunk, chunks, delta))."""
    out = dict(base)
    acc = {}
    for key, delta, chunk, chunks in patches:
        w = acc.setdefault(key, as_f32(base[key]).copy())
        rows = w.shape[0] // chunks
        w[chunk * rows:(chunk + 1) * rows] += np.float32(strength) * delta.reshape(w[chunk * rows:(chunk + 1) * rows].shape)
    for key, w in acc.items():
        out[key] = cast_like(base[key], w)
    return out


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(1234)
    # SD1.5 checkpoint (ldm naming, f16) and its diffusers-named twin (f32).
    u15 = unet(rng, **SD15)
    te15 = clip_hf("cond_stage_model.transformer.text_model.", 12, SD15["ctx"])
    vae = [("first_stage_model.decoder.conv_out.weight", (3, 4, 3, 3)), ("first_stage_model.decoder.conv_out.bias", (3,))]
    sd15_keys = [("model.diffusion_model." + l, s) for l, d, s in u15] + te15 + vae
    sd15 = values(rng, sd15_keys, np.float16)
    write_safetensors(f"{outdir}/sd15.safetensors", sd15, {"format": "pt"})
    dif = {}
    for (l, d, s) in u15:
        dif["unet." + d] = sd15["model.diffusion_model." + l].astype(np.float32)
    for k, s in te15:
        dif["text_encoder." + k[len("cond_stage_model.transformer."):]] = sd15[k].astype(np.float32)
    write_safetensors(f"{outdir}/sd15_diffusers.safetensors", dif)
    # SDXL checkpoint (ldm naming, bf16): CLIP-L in HF layout, OpenCLIP-bigG in open_clip layout.
    uxl = unet(rng, **SDXL)
    te1 = clip_hf("conditioner.embedders.0.transformer.text_model.", 12, 12)
    te2 = open_clip("conditioner.embedders.1.model.", 32, 8)
    sdxl = values(rng, [("model.diffusion_model." + l, s) for l, d, s in uxl] + te1 + te2 + vae, "bf16")
    write_safetensors(f"{outdir}/sdxl.safetensors", sdxl)
    # A pruned SD1.5 (two attention weights missing): LoRA modules aimed at them are NOT LOADED.
    pruned = dict(sd15)
    pruned_keys = ["model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight",
                   "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_k.weight"]
    for k in pruned_keys:
        del pruned[k]
    write_safetensors(f"{outdir}/sd15_pruned.safetensors", pruned)

    shapes15 = {d: s for l, d, s in u15}
    ldm_of15 = {d: l for l, d, s in u15}
    # ---- kohya LoRA for SD1.5 (diffusers module names, as sd-scripts writes them) ----
    rank = 4
    kohya, patches, modules = {}, [], []
    for d, s in shapes15.items():
        if any(t in d for t in ("attn1.to_", "attn2.to_", "ff.net", "proj_in", "proj_out")) and d.endswith(".weight"):
            modules.append(d)
    modules.append("down_blocks.1.resnets.0.conv1.weight")  # LoCon 3×3
    for i, d in enumerate(modules):
        name = "lora_unet_" + d[:-7].replace(".", "_")
        down, up = lora_pair(rng, shapes15[d], rank)
        alpha = [2.0, None, 0.0, 4.0][i % 4]
        kohya[name + ".lora_down.weight"] = down.astype(np.float16) if i % 3 == 0 else down
        kohya[name + ".lora_up.weight"] = up
        down = kohya[name + ".lora_down.weight"].astype(np.float32)
        if alpha is not None:
            kohya[name + ".alpha"] = np.array(alpha, dtype=np.float32)
        scale = alpha / rank if alpha is not None else 1.0  # ComfyUI: alpha 0 scales by 0
        delta = (up.reshape(up.shape[0], rank) @ down.reshape(rank, -1)) * np.float32(scale)
        patches.append(("model.diffusion_model." + ldm_of15[d], delta, 0, 1))
    for b in range(12):
        for sub in CLIP_SUB:
            key = f"cond_stage_model.transformer.text_model.encoder.layers.{b}.{sub}.weight"
            name = f"lora_te_text_model_encoder_layers_{b}_{sub.replace('.', '_')}"
            down, up = lora_pair(rng, sd15[key].shape, rank)
            kohya[name + ".lora_down.weight"], kohya[name + ".lora_up.weight"] = down, up
            kohya[name + ".alpha"] = np.array(2.0, dtype=np.float32)
            patches.append((key, (up @ down) * np.float32(0.5), 0, 1))
    write_safetensors(f"{outdir}/sd15_kohya.safetensors", kohya, {"ss_network_dim": "4"})
    merged = merge(sd15, patches, 0.8)
    write_safetensors(f"{outdir}/expected_sd15_kohya.safetensors", merged)
    diff_norms = {}
    for k in sd15:
        a, b = sd15[k].astype(np.float64), merged[k].astype(np.float64)
        if not np.array_equal(a, b):
            diff_norms[k] = [float(np.linalg.norm(b - a)), float(np.linalg.norm(a))]
    with open(f"{outdir}/expected_sd15_kohya_diff.json", "w") as f:
        json.dump(diff_norms, f)

    # ---- PEFT LoRA for SD1.5 (plus older diffusers forms, DoRA magnitude, an unknown key) ----
    peft, patches = {}, []
    sel = [d for d in shapes15 if "attn" in d and d.endswith(".weight") and "to_out" not in d][:24]
    forms = [(".lora_A.weight", ".lora_B.weight"), (".lora.down.weight", ".lora.up.weight"),
             (".lora_linear_layer.down.weight", ".lora_linear_layer.up.weight"),
             (".lora_A.default.weight", ".lora_B.default.weight")]
    for i, d in enumerate(sel):
        down, up = lora_pair(rng, shapes15[d], 8)
        fa, fb = forms[i % 4]
        name = "unet." + d[:-7]
        peft[name + fa], peft[name + fb] = down, up
        patches.append(("unet." + d, up @ down, 0, 1))
    proc = "unet." + sel[0][:-7].replace(".to_", ".processor.to_").replace("to_q", "to_q") + "_lora"
    down, up = lora_pair(rng, shapes15[sel[0]], 8)
    peft[proc + ".down.weight"], peft[proc + ".up.weight"] = down, up
    patches.append(("unet." + sel[0], up @ down, 0, 1))
    te_key = "text_model.encoder.layers.3.self_attn.v_proj.weight"
    down, up = lora_pair(rng, dif["text_encoder." + te_key].shape, 8)
    peft["text_encoder." + te_key[:-7] + ".lora_A.weight"] = down
    peft["text_encoder." + te_key[:-7] + ".lora_B.weight"] = up
    patches.append(("text_encoder." + te_key, up @ down, 0, 1))
    # DoRA (PEFT magnitude vector): ComfyUI does not read it, so merges apply the plain LoRA.
    dora = {k: v for k, v in peft.items() if k.startswith("text_encoder.")}
    dora["text_encoder." + te_key[:-7] + ".lora_magnitude_vector"] = np.ones(12, np.float32)
    write_safetensors(f"{outdir}/sd15_dora.safetensors", dora)
    peft["unet.some_adapter.extra_state"] = np.zeros(3, np.float32)
    write_safetensors(f"{outdir}/sd15_peft.safetensors", peft)
    write_safetensors(f"{outdir}/expected_sd15_peft.safetensors", merge(dif, patches, 1.0))

    # ---- LoHa and LoKr for SD1.5 (kohya names), plus a full diff module ----
    loha, lokr, p_loha, p_lokr = {}, {}, [], []
    targets = [d for d in shapes15 if d.endswith("attn1.to_q.weight") or d.endswith("ff.net.2.weight")][:10]
    for i, d in enumerate(targets):
        s = shapes15[d]
        name = "lora_unet_" + d[:-7].replace(".", "_")
        r = 2
        w1a, w1b = rng.standard_normal((s[0], r)).astype(np.float32) * .3, rng.standard_normal((r, s[1])).astype(np.float32) * .3
        w2a, w2b = rng.standard_normal((s[0], r)).astype(np.float32) * .3, rng.standard_normal((r, s[1])).astype(np.float32) * .3
        loha.update({name + ".hada_w1_a": w1a, name + ".hada_w1_b": w1b, name + ".hada_w2_a": w2a,
                     name + ".hada_w2_b": w2b, name + ".alpha": np.array(1.0, np.float32)})
        p_loha.append(("model.diffusion_model." + ldm_of15[d], (w1a @ w1b) * (w2a @ w2b) * np.float32(0.5), 0, 1))
        # LoKr: w1 (2×2) ⊗ w2, w2 = w2_a·w2_b (decomposed, so alpha/rank applies) or whole.
        w1 = rng.standard_normal((2, 2)).astype(np.float32)
        if i % 2 == 0:
            w2a = rng.standard_normal((s[0] // 2, 2)).astype(np.float32)
            w2b = rng.standard_normal((2, s[1] // 2)).astype(np.float32)
            lokr.update({name + ".lokr_w1": w1, name + ".lokr_w2_a": w2a, name + ".lokr_w2_b": w2b,
                         name + ".alpha": np.array(1.0, np.float32)})
            p_lokr.append(("model.diffusion_model." + ldm_of15[d], np.kron(w1, w2a @ w2b) * np.float32(0.5), 0, 1))
        else:
            w2 = rng.standard_normal((s[0] // 2, s[1] // 2)).astype(np.float32)
            lokr.update({name + ".lokr_w1": w1, name + ".lokr_w2": w2})
            p_lokr.append(("model.diffusion_model." + ldm_of15[d], np.kron(w1, w2), 0, 1))
    conv = "down_blocks.0.resnets.0.conv2.weight"
    diff = (rng.standard_normal(shapes15[conv]) * 0.01).astype(np.float32)
    lokr["lora_unet_" + conv[:-7].replace(".", "_") + ".diff"] = diff
    p_lokr.append(("model.diffusion_model." + ldm_of15[conv], diff, 0, 1))
    write_safetensors(f"{outdir}/sd15_loha.safetensors", loha)
    write_safetensors(f"{outdir}/sd15_lokr.safetensors", lokr)
    write_safetensors(f"{outdir}/expected_sd15_loha.safetensors", merge(sd15, p_loha, 1.0))
    write_safetensors(f"{outdir}/expected_sd15_lokr.safetensors", merge(sd15, p_lokr, 0.5))

    # ---- kohya LoRA for SDXL (ldm module names, te1/te2; te2 q/k/v land in in_proj chunks) ----
    xl, patches = {}, []
    for l, d, s in uxl:
        if "transformer_blocks.1." in l and l.endswith(("attn2.to_k.weight", "attn1.to_q.weight")):
            name = "lora_unet_" + l[:-7].replace(".", "_")
            down, up = lora_pair(rng, s, 4)
            xl[name + ".lora_down.weight"], xl[name + ".lora_up.weight"] = down, up
            xl[name + ".alpha"] = np.array(4.0, np.float32)
            patches.append(("model.diffusion_model." + l, up @ down, 0, 1))
    for b in (0, 11):
        key = f"conditioner.embedders.0.transformer.text_model.encoder.layers.{b}.mlp.fc1.weight"
        down, up = lora_pair(rng, sdxl[key].bits.shape, 4)
        xl[f"lora_te1_text_model_encoder_layers_{b}_mlp_fc1.lora_down.weight"] = down
        xl[f"lora_te1_text_model_encoder_layers_{b}_mlp_fc1.lora_up.weight"] = up
        patches.append((key, up @ down, 0, 1))
    for b in (0, 31):
        for chunk, sub in enumerate(("q_proj", "k_proj", "v_proj")):
            key = f"conditioner.embedders.1.model.transformer.resblocks.{b}.attn.in_proj_weight"
            down, up = lora_pair(rng, (8, 8), 4)
            xl[f"lora_te2_text_model_encoder_layers_{b}_self_attn_{sub}.lora_down.weight"] = down
            xl[f"lora_te2_text_model_encoder_layers_{b}_self_attn_{sub}.lora_up.weight"] = up
            patches.append((key, up @ down, chunk, 3))
    write_safetensors(f"{outdir}/sdxl_kohya.safetensors", xl)
    write_safetensors(f"{outdir}/expected_sdxl_kohya.safetensors", merge(sdxl, patches, 1.0))

    # ---- broken LoRAs ----
    base = {k: v for k, v in kohya.items() if "down_blocks_1_attentions_0_transformer_blocks_0_attn1" in k}
    missing = dict(base)
    del missing["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q.lora_up.weight"]
    write_safetensors(f"{outdir}/bad_missing_half.safetensors", missing)
    ranks = dict(base)
    ranks["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_k.lora_up.weight"] = \
        rng.standard_normal((16, 3)).astype(np.float32)
    write_safetensors(f"{outdir}/bad_rank_mismatch.safetensors", ranks)
    nan = dict(base)
    v = nan["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_v.lora_up.weight"].copy()
    v[3, 1] = np.nan
    nan["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_v.lora_up.weight"] = v
    write_safetensors(f"{outdir}/bad_nan.safetensors", nan)
    # Explicit norms of every kohya SD1.5 module (strength 1) for the trace-identity check.
    norms = {}
    for k in kohya:
        if k.endswith(".lora_down.weight"):
            n = k[:-len(".lora_down.weight")]
            down = kohya[k].astype(np.float32)
            up = kohya[n + ".lora_up.weight"].astype(np.float32)
            a = kohya.get(n + ".alpha")
            scale = float(a) / down.shape[0] if a is not None else 1.0
            norms[n] = float(np.linalg.norm(up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1)) * scale)
    with open(f"{outdir}/sd15_kohya_norms.json", "w") as f:
        json.dump(norms, f)


if __name__ == "__main__":
    main(sys.argv[1])
