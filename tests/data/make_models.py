#!/usr/bin/python3
"""Writes tiny checkpoints with the complete key layouts of SD1.5, SDXL, SD3, Flux, Wan 2.1 and
Qwen-Image (tests/data/layouts.py; original and diffusers naming, a pruned SD1.5), LoRAs named
as each trainer names them (kohya sd-scripts, diffusers PEFT, LyCORIS, OneTrainer, ai-toolkit,
musubi-tuner), broken LoRAs, and for every (base, LoRA) pair what ComfyUI's LoraLoader does
with it, as ComfyUI's own code answered (recorded in tests/fixtures/comfy_answers/ by
tests/data/record_comfy_answers.sh; read by tests/data/comfy_answers.py): `comfy_cases.json`.
Merge references (expected_*.safetensors) apply exactly the modules ComfyUI applies.

usage: make_models.py OUTDIR        (fixed seeds: the output is deterministic)
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import comfy_answers  # noqa: E402
import layouts  # noqa: E402

# ---------------------------------------------------------------- safetensors by hand ----
def bf16_bits(x):
    """float32 -> bfloat16 bits, round to nearest even (as genscope and PyTorch do)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    one, half, sixteen = np.uint64(1), np.uint64(0x7FFF), np.uint64(16)
    return ((u + half + ((u >> sixteen) & one)) >> sixteen).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class BF16:
    """A bfloat16 tensor held as its bits."""
    def __init__(self, bits):
        self.bits = bits


def write_safetensors_raw(path, entries, metadata=None):
    """Writes a safetensors file from name -> (dtype name, shape, little-endian bytes)."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in entries.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_safetensors(path, tensors, metadata=None):
    entries = {}
    for name, arr in tensors.items():
        if isinstance(arr, BF16):
            entries[name] = ("BF16", arr.bits.shape, arr.bits.tobytes())
        else:
            dtype = {np.float32: "F32", np.float16: "F16", np.int64: "I64"}[arr.dtype.type]
            entries[name] = (dtype, arr.shape, np.ascontiguousarray(arr).tobytes())
    write_safetensors_raw(path, entries, metadata)


def as_f32(arr):
    return bf16_to_f32(arr.bits) if isinstance(arr, BF16) else arr.astype(np.float32)


def cast_like(ref, value):
    if isinstance(ref, BF16):
        return BF16(bf16_bits(value))
    return value.astype(ref.dtype)


def shape_of(arr):
    return tuple(arr.bits.shape) if isinstance(arr, BF16) else tuple(arr.shape)


def values(rng, keys, dtype):
    """keys: (name, shape[, "I64"]); random weights of `dtype` (int64 buffers count up)."""
    out = {}
    for k in keys:
        name, shape = k[0], k[1]
        if len(k) > 2:
            out[name] = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
            continue
        v = (rng.standard_normal(shape) * 0.1).astype(np.float32)
        out[name] = BF16(bf16_bits(v)) if dtype == "bf16" else v.astype(dtype)
    return out


# ---------------------------------------------------------------- model structures -------
SD15 = dict(mc=8, mult=[1, 2, 4, 4], nres=2, depth_in=[1, 1, 1, 0], depth_mid=1, depth_out=[1, 1, 1, 0],
            ctx=12, temb=16, adm=0, linear=False)
SDXL = dict(mc=12, mult=[1, 2, 4], nres=2, depth_in=[0, 2, 10], depth_mid=10, depth_out=[0, 2, 10],
            ctx=20, temb=24, adm=32, linear=True)


def unet_config(p):
    return layouts.comfy_unet_config(p["nres"], p["mult"], p["depth_in"], p["depth_mid"], p["depth_out"])


class Base:
    """A base file and the model ComfyUI builds from it: ordered state-dict keys of the
    diffusion model and of the text encoders, where each lives in the file."""
    def __init__(self, file, family, config):
        self.file, self.family, self.config = file, family, config
        self.model_sdk, self.clip_sdk, self.file_of, self.shapes = [], [], {}, {}
        self.missing = set()   # model keys a pruned file lacks (ComfyUI builds and patches them)
        self.identity = set()  # model keys ComfyUI initialises to the identity (not in the file)

    def model(self, comfy_key, file_key, shape):
        self.model_sdk.append(comfy_key)
        self.file_of[comfy_key], self.shapes[comfy_key] = file_key, shape

    def clip(self, comfy_key, file_key, shape):
        self.clip_sdk.append(comfy_key)
        self.file_of[comfy_key], self.shapes[comfy_key] = file_key, shape

    def hf_tower(self, name, file_root, keys):
        """An HF-layout CLIP/T5 tower: `keys` (file names under file_root) -> name.transformer."""
        width = 0
        for k in keys:
            rel = k[0][len(file_root):]
            if rel.endswith("position_ids"):
                continue
            self.clip(f"{name}.transformer.{rel}", k[0], k[1])
            if rel == "text_model.final_layer_norm.weight":
                width = k[1][0]
        if name != "t5xxl" and f"{name}.transformer.text_projection.weight" not in self.file_of:
            # comfy/clip_model.py CLIPTextModel: an identity text_projection the file lacks.
            self.clip(f"{name}.transformer.text_projection.weight", file_root + "text_projection.weight", (width, width))
            self.identity.add(f"{name}.transformer.text_projection.weight")

    def open_clip_tower(self, name, p, layers, d):
        """comfy/utils.py clip_text_transformers_convert of an OpenCLIP tower."""
        t = f"{name}.transformer.text_model."
        self.clip(t + "embeddings.token_embedding.weight", p + "token_embedding.weight", (64, d))
        self.clip(t + "embeddings.position_embedding.weight", p + "positional_embedding", (77, d))
        for l in range(layers):
            f, m = f"{p}transformer.resblocks.{l}.", f"{t}encoder.layers.{l}."
            for o, h in (("ln_1", "layer_norm1"), ("ln_2", "layer_norm2"), ("mlp.c_fc", "mlp.fc1"),
                         ("mlp.c_proj", "mlp.fc2"), ("attn.out_proj", "self_attn.out_proj")):
                for end in ("weight", "bias"):
                    self.clip(f"{m}{h}.{end}", f"{f}{o}.{end}", None)
            for c, q in enumerate(("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")):
                for end in ("weight", "bias"):
                    self.clip(f"{m}{q}.{end}", (f"{f}attn.in_proj_{end}", c), None)
        self.clip(t + "final_layer_norm.weight", p + "ln_final.weight", (d,))
        self.clip(t + "final_layer_norm.bias", p + "ln_final.bias", (d,))
        self.clip(f"{name}.transformer.text_projection.weight", p + "text_projection", (d, d))

    def comfy(self, lora_file, lora):
        """What ComfyUI's LoraLoader does with the LoRA `lora` (name -> tensor) on this base."""
        r = comfy_answers.lora_loader(f"{lora_file} on {self.file}", self.comfy_model(), lora,
                                      {k: shape_of(v) for k, v in lora.items()})
        return {"base": self.file, **comfy_answers.in_file_terms(r, self.file_of, self.missing, self.identity)}

    def comfy_model(self):
        """The model ComfyUI builds, as ComfyUI's code is asked about it (comfy_answers.py)."""
        return {"family": self.family, "config": self.config, "model_sdk": self.model_sdk,
                "clip_sdk": self.clip_sdk, "shapes": {k: list(s) if s else None for k, s in self.shapes.items()}}

    def description(self):
        """The model ComfyUI builds, for tests/peers/lora_comfyui.py (a stand-in model)."""
        return {"family": self.family, "config": self.config, "model_sdk": self.model_sdk,
                "clip_sdk": self.clip_sdk, "file_of": self.file_of, "missing": sorted(self.missing),
                "identity": sorted(self.identity)}


def lora_pair(rng, shape, rank):
    """(down, up) for a weight of `shape`; conv weights keep their kernel on down."""
    out_dim = shape[0]
    if len(shape) == 4:
        down = (rng.standard_normal((rank, shape[1], shape[2], shape[3])) * 0.2).astype(np.float32)
        up = (rng.standard_normal((out_dim, rank, 1, 1)) * 0.2).astype(np.float32)
    else:
        down = (rng.standard_normal((rank, int(np.prod(shape[1:])))) * 0.2).astype(np.float32)
        up = (rng.standard_normal((out_dim, rank)) * 0.2).astype(np.float32)
    return down, up


def merge(base, patches, strength):
    """patches: (key, delta, chunk, chunks) with delta reshaped to the weight (or chunk)."""
    out = dict(base)
    acc = {}
    for key, delta, chunk, chunks in patches:
        w = acc.setdefault(key, as_f32(base[key]).copy())
        rows = w.shape[0] // chunks
        w[chunk * rows:(chunk + 1) * rows] += np.float32(strength) * delta.reshape(w[chunk * rows:(chunk + 1) * rows].shape)
    for key, w in acc.items():
        out[key] = cast_like(base[key], w)
    return out


def merge_rows(base, patches, strength, new=None):
    """patches: (key, delta, first_row, rows) — delta added to rows [first_row, first_row + rows)
    of the weight (rows None: the whole weight); new: {key: f32 identity-initialised weight}
    written as new tensors of `base`'s dtype."""
    out = dict(base)
    acc = {}
    for key, delta, first, rows in patches:
        w = acc.setdefault(key, as_f32(base[key]).copy() if key in base else new[key].copy())
        if rows is None:
            w += np.float32(strength) * delta.reshape(w.shape)
        else:
            w[first:first + rows] += np.float32(strength) * delta.reshape(w[first:first + rows].shape)
    for key, w in acc.items():
        ref = base[key] if key in base else next(iter(base.values()))
        out[key] = cast_like(ref, w)
    return out


class Cases:
    """Collects the ComfyUI expectation of every (base, LoRA) pair."""
    def __init__(self):
        self.cases = []
        self.models = {}

    def add(self, base, lora_file, lora):
        c = base.comfy(lora_file, lora)
        c["lora"] = lora_file
        self.cases.append(c)
        self.models[base.file] = base.description()
        return c


def kohya_name(path):
    return "lora_unet_" + path.replace(".", "_")


def add_lora(out, name, shape, rng, rank=4, alpha=None, forms=(".lora_down.weight", ".lora_up.weight")):
    down, up = lora_pair(rng, shape, rank)
    out[name + forms[0]], out[name + forms[1]] = down, up
    if alpha is not None:
        out[name + ".alpha"] = np.array(alpha, dtype=np.float32)
    return down, up


# ---------------------------------------------------------------- SD1.5 / SDXL ------------
def sd_family(outdir, rng, cases):
    u15 = layouts.unet(**SD15)
    te15 = layouts.clip_hf("cond_stage_model.transformer.text_model.", 12, SD15["ctx"], position_ids=True)
    vae = layouts.vae("first_stage_model.")
    sd15_keys = [("model.diffusion_model." + l, s) for l, d, s in u15] + te15 + vae
    sd15 = values(rng, sd15_keys, np.float16)
    write_safetensors(f"{outdir}/sd15.safetensors", sd15, {"format": "pt"})
    b15 = Base("sd15.safetensors", "unet", unet_config(SD15))
    for l, d, s in u15:
        b15.model("diffusion_model." + l, "model.diffusion_model." + l, s)
    b15.hf_tower("clip_l", "cond_stage_model.transformer.", te15)

    dif = {}
    for (l, d, s) in u15:
        dif["unet." + d] = sd15["model.diffusion_model." + l].astype(np.float32)
    for k in te15:
        if not k[0].endswith("position_ids"):
            dif["text_encoder." + k[0][len("cond_stage_model.transformer."):]] = sd15[k[0]].astype(np.float32)
    write_safetensors(f"{outdir}/sd15_diffusers.safetensors", dif)
    b15d = Base("sd15_diffusers.safetensors", "unet", unet_config(SD15))
    for l, d, s in u15:
        b15d.model("diffusion_model." + l, "unet." + d, s)
    b15d.hf_tower("clip_l", "text_encoder.", [("text_encoder." + k[0][len("cond_stage_model.transformer."):], k[1])
                                               for k in te15 if not k[0].endswith("position_ids")])

    # A pruned SD1.5: ComfyUI still builds these weights from the config and patches them.
    pruned = dict(sd15)
    pruned_keys = ["model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_q.weight",
                   "model.diffusion_model.input_blocks.1.1.transformer_blocks.0.attn1.to_k.weight"]
    for k in pruned_keys:
        del pruned[k]
    write_safetensors(f"{outdir}/sd15_pruned.safetensors", pruned)
    b15p = Base("sd15_pruned.safetensors", "unet", unet_config(SD15))
    b15p.model_sdk, b15p.clip_sdk, b15p.file_of, b15p.shapes = b15.model_sdk, b15.clip_sdk, b15.file_of, b15.shapes
    b15p.identity = b15.identity
    b15p.missing = {k[len("model."):] for k in pruned_keys}

    uxl = layouts.unet(**SDXL)
    te1 = layouts.clip_hf("conditioner.embedders.0.transformer.text_model.", 12, 12)
    te2 = layouts.open_clip("conditioner.embedders.1.model.", 32, 8)
    sdxl = values(rng, [("model.diffusion_model." + l, s) for l, d, s in uxl] + te1 + te2 + vae, "bf16")
    write_safetensors(f"{outdir}/sdxl.safetensors", sdxl)
    bxl = Base("sdxl.safetensors", "unet", unet_config(SDXL))
    for l, d, s in uxl:
        bxl.model("diffusion_model." + l, "model.diffusion_model." + l, s)
    bxl.hf_tower("clip_l", "conditioner.embedders.0.transformer.", te1)
    bxl.open_clip_tower("clip_g", "conditioner.embedders.1.model.", 32, 8)

    shapes15 = {d: s for l, d, s in u15}
    ldm_of15 = {d: l for l, d, s in u15}
    # ---- kohya sd-scripts LoRA for SD1.5 (diffusers module names) ----
    rank = 4
    kohya, deltas = {}, {}
    modules = [d for d in shapes15 if any(t in d for t in ("attn1.to_", "attn2.to_", "ff.net", "proj_in", "proj_out"))
               and d.endswith(".weight")]
    modules.append("down_blocks.1.resnets.0.conv1.weight")  # LoCon 3×3
    for i, d in enumerate(modules):
        name = kohya_name(d[:-7])
        down, up = lora_pair(rng, shapes15[d], rank)
        alpha = [2.0, None, 0.0, 4.0][i % 4]
        kohya[name + ".lora_down.weight"] = down.astype(np.float16) if i % 3 == 0 else down
        kohya[name + ".lora_up.weight"] = up
        down = kohya[name + ".lora_down.weight"].astype(np.float32)
        if alpha is not None:
            kohya[name + ".alpha"] = np.array(alpha, dtype=np.float32)
        scale = alpha / rank if alpha is not None else 1.0  # ComfyUI: alpha 0 scales by 0
        deltas[name] = ("model.diffusion_model." + ldm_of15[d], (up.reshape(up.shape[0], rank) @ down.reshape(rank, -1)) * np.float32(scale), 0, 1)
    for b in range(12):
        for sub in layouts.CLIP_SUB:
            key = f"cond_stage_model.transformer.text_model.encoder.layers.{b}.{sub}.weight"
            name = f"lora_te_text_model_encoder_layers_{b}_{sub.replace('.', '_')}"
            down, up = add_lora(kohya, name, sd15[key].shape, rng, rank, alpha=2.0)
            deltas[name] = (key, (up @ down) * np.float32(0.5), 0, 1)
    write_safetensors(f"{outdir}/sd15_kohya.safetensors", kohya, {"ss_network_dim": "4"})
    c = cases.add(b15, "sd15_kohya.safetensors", kohya)
    merged = merge(sd15, [deltas[m] for m in c["applied"]], 0.8)
    write_safetensors(f"{outdir}/expected_sd15_kohya.safetensors", merged)
    diff_norms = {}
    for k in sd15:
        a, b = sd15[k].astype(np.float64), merged[k].astype(np.float64)
        if not np.array_equal(a, b):
            diff_norms[k] = [float(np.linalg.norm(b - a)), float(np.linalg.norm(a))]
    with open(f"{outdir}/expected_sd15_kohya_diff.json", "w") as f:
        json.dump(diff_norms, f)
    cases.add(b15d, "sd15_kohya.safetensors", kohya)
    cases.add(b15p, "sd15_kohya.safetensors", kohya)
    cases.add(bxl, "sd15_kohya.safetensors", kohya)

    # ---- diffusers PEFT LoRA for SD1.5 (with the older diffusers forms and an unknown key):
    # ComfyUI maps diffusers attention only through ".processor." names ----
    peft, deltas = {}, {}
    sel = [d for d in shapes15 if "attn" in d and d.endswith(".weight") and "to_out" not in d][:24]
    forms = [(".lora_A.weight", ".lora_B.weight"), (".lora.down.weight", ".lora.up.weight"),
             (".lora_linear_layer.down.weight", ".lora_linear_layer.up.weight"),
             (".lora_A.default.weight", ".lora_B.default.weight")]
    for i, d in enumerate(sel):
        name = "unet." + d[:-7]
        down, up = add_lora(peft, name, shapes15[d], rng, 8, forms=forms[i % 4])
        deltas[name] = ("unet." + d, up @ down, 0, 1)
    proc = "unet." + sel[0][:-7].replace(".to_", ".processor.to_")
    down, up = add_lora(peft, proc, shapes15[sel[0]], rng, 8, forms=("_lora.down.weight", "_lora.up.weight"))
    deltas[proc] = ("unet." + sel[0], up @ down, 0, 1)
    proj = "unet.down_blocks.0.attentions.0.proj_in"
    down, up = add_lora(peft, proj, shapes15["down_blocks.0.attentions.0.proj_in.weight"], rng, 8,
                        forms=(".lora_A.weight", ".lora_B.weight"))
    deltas[proj] = ("unet.down_blocks.0.attentions.0.proj_in.weight", (up.reshape(up.shape[0], -1) @ down.reshape(down.shape[0], -1)).reshape(shapes15["down_blocks.0.attentions.0.proj_in.weight"]), 0, 1)
    te_key = "text_model.encoder.layers.3.self_attn.v_proj.weight"
    down, up = add_lora(peft, "text_encoder." + te_key[:-7], dif["text_encoder." + te_key].shape, rng, 8,
                        forms=(".lora_A.weight", ".lora_B.weight"))
    deltas["text_encoder." + te_key[:-7]] = ("text_encoder." + te_key, up @ down, 0, 1)
    # DoRA: a text-encoder module with a PEFT magnitude vector.
    dora = {k: v for k, v in peft.items() if k.startswith("text_encoder.")}
    dora["text_encoder." + te_key[:-7] + ".lora_magnitude_vector"] = np.ones(12, np.float32)
    write_safetensors(f"{outdir}/sd15_dora.safetensors", dora)
    peft["unet.some_adapter.extra_state"] = np.zeros(3, np.float32)
    write_safetensors(f"{outdir}/sd15_peft.safetensors", peft)
    c = cases.add(b15d, "sd15_peft.safetensors", peft)
    write_safetensors(f"{outdir}/expected_sd15_peft.safetensors", merge(dif, [deltas[m] for m in c["applied"]], 1.0))
    cases.add(b15, "sd15_peft.safetensors", peft)

    # ---- LyCORIS LoHa and LoKr (kohya names), plus a full diff module ----
    loha, lokr, p_loha, p_lokr = {}, {}, [], []
    targets = [d for d in shapes15 if d.endswith("attn1.to_q.weight") or d.endswith("ff.net.2.weight")][:10]
    for i, d in enumerate(targets):
        s = shapes15[d]
        name = kohya_name(d[:-7])
        r = 2
        w1a, w1b = rng.standard_normal((s[0], r)).astype(np.float32) * .3, rng.standard_normal((r, s[1])).astype(np.float32) * .3
        w2a, w2b = rng.standard_normal((s[0], r)).astype(np.float32) * .3, rng.standard_normal((r, s[1])).astype(np.float32) * .3
        loha.update({name + ".hada_w1_a": w1a, name + ".hada_w1_b": w1b, name + ".hada_w2_a": w2a,
                     name + ".hada_w2_b": w2b, name + ".alpha": np.array(1.0, np.float32)})
        p_loha.append(("model.diffusion_model." + ldm_of15[d], (w1a @ w1b) * (w2a @ w2b) * np.float32(0.5), 0, 1))
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
    lokr[kohya_name(conv[:-7]) + ".diff"] = diff
    p_lokr.append(("model.diffusion_model." + ldm_of15[conv], diff, 0, 1))
    write_safetensors(f"{outdir}/sd15_loha.safetensors", loha)
    write_safetensors(f"{outdir}/sd15_lokr.safetensors", lokr)
    write_safetensors(f"{outdir}/expected_sd15_loha.safetensors", merge(sd15, p_loha, 1.0))
    write_safetensors(f"{outdir}/expected_sd15_lokr.safetensors", merge(sd15, p_lokr, 0.5))
    cases.add(b15, "sd15_loha.safetensors", loha)
    cases.add(b15, "sd15_lokr.safetensors", lokr)

    # ---- issue cases on SD1.5: a half LoRA (down without up), one weight named twice (ldm and
    # diffusers kohya names), bias deltas (diff_b on a weight with and without bias), names of
    # layers this UNet lacks (skip_connection of an 8->8 resblock, class_embedding) ----
    half = {}
    add_lora(half, kohya_name("down_blocks.0.attentions.0.proj_out"), shapes15["down_blocks.0.attentions.0.proj_out.weight"], rng, alpha=4.0)
    down, up = lora_pair(rng, shapes15["down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight"], 4)
    half[kohya_name("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q") + ".lora_down.weight"] = down
    half[kohya_name("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q") + ".alpha"] = np.array(4.0, np.float32)
    write_safetensors(f"{outdir}/sd15_half.safetensors", half)
    cases.add(b15, "sd15_half.safetensors", half)
    twice = {}
    add_lora(twice, "lora_unet_input_blocks_1_1_proj_in", shapes15["down_blocks.0.attentions.0.proj_in.weight"], rng)
    add_lora(twice, kohya_name("down_blocks.0.attentions.0.proj_in"), shapes15["down_blocks.0.attentions.0.proj_in.weight"], rng)
    add_lora(twice, kohya_name("down_blocks.0.attentions.0.proj_out"), shapes15["down_blocks.0.attentions.0.proj_out.weight"], rng)
    write_safetensors(f"{outdir}/sd15_twice.safetensors", twice)
    cases.add(b15, "sd15_twice.safetensors", twice)
    cases.add(b15d, "sd15_twice.safetensors", twice)
    full = {}
    conv_in = sd15["model.diffusion_model.input_blocks.0.0.weight"]
    full["lora_unet_conv_in.diff"] = (rng.standard_normal(conv_in.shape) * 0.01).astype(np.float32)
    full["lora_unet_conv_in.diff_b"] = (rng.standard_normal(conv_in.shape[0]) * 0.01).astype(np.float32)
    to_q = kohya_name("down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q")
    add_lora(full, to_q, shapes15["down_blocks.0.attentions.0.transformer_blocks.0.attn1.to_q.weight"], rng)
    full[to_q + ".diff_b"] = np.zeros(8, np.float32)
    norm = kohya_name("down_blocks.0.resnets.0.norm1")
    full[norm + ".w_norm"] = np.ones(8, np.float32)
    full[norm + ".b_norm"] = np.zeros(8, np.float32)
    add_lora(full, kohya_name("down_blocks.0.resnets.0.conv_shortcut"), (8, 8, 1, 1), rng)
    add_lora(full, "lora_unet_class_embedding_linear_1", (16, 8), rng)
    write_safetensors(f"{outdir}/sd15_full.safetensors", full)
    cases.add(b15, "sd15_full.safetensors", full)
    cases.add(b15d, "sd15_full.safetensors", full)

    # ---- kohya LoRA for SDXL (ldm module names, te1/te2; te2 q/k/v land in in_proj chunks) ----
    xl, patches = {}, []
    for l, d, s in uxl:
        if "transformer_blocks.1." in l and l.endswith(("attn2.to_k.weight", "attn1.to_q.weight")):
            down, up = add_lora(xl, kohya_name(l[:-7]), s, rng, alpha=4.0)
            patches.append(("model.diffusion_model." + l, up @ down, 0, 1))
    for b in (0, 11):
        key = f"conditioner.embedders.0.transformer.text_model.encoder.layers.{b}.mlp.fc1.weight"
        down, up = add_lora(xl, f"lora_te1_text_model_encoder_layers_{b}_mlp_fc1", sdxl[key].bits.shape, rng)
        patches.append((key, up @ down, 0, 1))
    for b in (0, 31):
        for chunk, sub in enumerate(("q_proj", "k_proj", "v_proj")):
            key = f"conditioner.embedders.1.model.transformer.resblocks.{b}.attn.in_proj_weight"
            down, up = add_lora(xl, f"lora_te2_text_model_encoder_layers_{b}_self_attn_{sub}", (8, 8), rng)
            patches.append((key, up @ down, chunk, 3))
    write_safetensors(f"{outdir}/sdxl_kohya.safetensors", xl)
    write_safetensors(f"{outdir}/expected_sdxl_kohya.safetensors", merge(sdxl, patches, 1.0))
    cases.add(bxl, "sdxl_kohya.safetensors", xl)
    cases.add(b15, "sdxl_kohya.safetensors", xl)
    # OneTrainer-style text projections and ComfyUI's generic text_encoders.* names.
    ot = {}
    add_lora(ot, "lora_te1_text_projection", (12, 12), rng)
    add_lora(ot, "lora_te2_text_projection", (8, 8), rng)
    add_lora(ot, "text_encoders.clip_l.transformer.text_model.encoder.layers.0.mlp.fc1", (48, 12), rng)
    add_lora(ot, "text_encoders.clip_g.transformer.text_model.encoder.layers.5.self_attn.k_proj", (8, 8), rng)
    write_safetensors(f"{outdir}/sdxl_onetrainer.safetensors", ot)
    cases.add(bxl, "sdxl_onetrainer.safetensors", ot)
    # Generic names on SDXL (model_lora_keys_unet's first loop: "diffusion_model.<key>" and
    # "lora_unet_<key with _>" for every weight, "diffusion_model.<key>" for every other key) with
    # bias patches: diff_b after a LoRA, w_norm + b_norm, diff + diff_b, a diff_b alone, and a
    # diff on a bias's own name. (Own generator: the files written after these stay as they were.)
    xrng = np.random.default_rng(21)
    gen, ub = {}, "model.diffusion_model.input_blocks.4.1."
    add_lora(gen, "diffusion_model.input_blocks.4.1.proj_out", sdxl[ub + "proj_out.weight"].bits.shape, xrng,
             forms=(".lora_A.weight", ".lora_B.weight"))
    c = sdxl[ub + "proj_out.bias"].bits.shape[0]
    gen["diffusion_model.input_blocks.4.1.proj_out.diff_b"] = (xrng.standard_normal(c) * 0.01).astype(np.float32)
    gen["lora_unet_input_blocks_4_1_norm.w_norm"] = (xrng.standard_normal(c) * 0.01).astype(np.float32)
    gen["lora_unet_input_blocks_4_1_norm.b_norm"] = (xrng.standard_normal(c) * 0.01).astype(np.float32)
    gen["diffusion_model.input_blocks.4.1.proj_in.diff"] = \
        (xrng.standard_normal(sdxl[ub + "proj_in.weight"].bits.shape) * 0.01).astype(np.float32)
    gen["diffusion_model.input_blocks.4.1.proj_in.diff_b"] = (xrng.standard_normal(c) * 0.01).astype(np.float32)
    gen["lora_unet_input_blocks_4_1_transformer_blocks_0_norm1.diff_b"] = (xrng.standard_normal(c) * 0.01).astype(np.float32)
    gen["diffusion_model.middle_block.1.proj_out.bias.diff"] = \
        (xrng.standard_normal(sdxl["model.diffusion_model.middle_block.1.proj_out.bias"].bits.shape) * 0.01).astype(np.float32)
    write_safetensors(f"{outdir}/sdxl_generic.safetensors", gen)
    cases.add(bxl, "sdxl_generic.safetensors", gen)
    # CLIP-L's text_projection on SD1.5: the file has none; ComfyUI's CLIPTextModel builds an
    # identity projection and the LoRA patches that (a built-in weight, not a file tensor).
    tp = {}
    add_lora(tp, "lora_te1_text_projection", (12, 12), xrng)
    add_lora(tp, "lora_te1_text_model_encoder_layers_0_self_attn_q_proj", (12, 12), xrng)
    write_safetensors(f"{outdir}/sd15_text_projection.safetensors", tp)
    cases.add(b15, "sd15_text_projection.safetensors", tp)
    cases.add(b15d, "sd15_text_projection.safetensors", tp)

    # ---- broken LoRAs: an up without its down (ComfyUI raises KeyError), ranks, NaN ----
    base = {k: v for k, v in kohya.items() if "down_blocks_1_attentions_0_transformer_blocks_0_attn1" in k}
    missing = dict(base)
    del missing["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_q.lora_down.weight"]
    write_safetensors(f"{outdir}/bad_missing_half.safetensors", missing)
    cases.add(b15, "bad_missing_half.safetensors", missing)
    ranks = dict(base)
    ranks["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_k.lora_up.weight"] = \
        rng.standard_normal((16, 3)).astype(np.float32)
    write_safetensors(f"{outdir}/bad_rank_mismatch.safetensors", ranks)
    nan = dict(base)
    v = nan["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_v.lora_up.weight"].copy()
    v[3, 1] = np.nan
    nan["lora_unet_down_blocks_1_attentions_0_transformer_blocks_0_attn1_to_v.lora_up.weight"] = v
    write_safetensors(f"{outdir}/bad_nan.safetensors", nan)
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


# ---------------------------------------------------------------- DiT families ------------
def dit_base(outdir, rng, file, family, config, keys, prefix, towers=()):
    """Writes a DiT checkpoint (diffusion keys under `prefix`, plus text towers) and its Base."""
    tensors = values(rng, [(prefix + k, s) for k, s in keys] + [k for t in towers for k in t[2]], np.float16)
    write_safetensors(f"{outdir}/{file}", tensors)
    b = Base(file, family, config)
    for k, s in keys:
        b.model("diffusion_model." + k, prefix + k, s)
    for name, root, tkeys in towers:
        b.hf_tower(name, root, tkeys)
    return b, tensors


def sd3(outdir, rng, cases):
    hidden, blocks = 64, 24  # ComfyUI's "depth" is x_embedder rows / 64 = 1
    keys = layouts.mmdit(blocks, hidden)
    towers = [("clip_l", "text_encoders.clip_l.transformer.",
               layouts.clip_hf("text_encoders.clip_l.transformer.text_model.", 12, 12, projection=True)),
              ("clip_g", "text_encoders.clip_g.transformer.",
               layouts.clip_hf("text_encoders.clip_g.transformer.text_model.", 32, 8, projection=True)),
              ("t5xxl", "text_encoders.t5xxl.transformer.", layouts.t5_encoder("text_encoders.t5xxl.transformer.", 24, 8))]
    base, sd3_t = dit_base(outdir, rng, "sd3.safetensors", "sd3", {"depth": hidden // 64, "num_blocks": blocks}, keys,
                           "model.diffusion_model.", towers)
    h = hidden
    peft = {}  # diffusers train_dreambooth_lora_sd3
    for i in (0, 5, 23):
        for m in ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"):
            add_lora(peft, f"transformer.transformer_blocks.{i}.attn.{m}", (h, h), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    add_lora(peft, "text_encoder.text_model.encoder.layers.0.self_attn.q_proj", (12, 12), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    add_lora(peft, "text_encoder_2.text_model.encoder.layers.1.self_attn.q_proj", (8, 8), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    write_safetensors(f"{outdir}/sd3_peft.safetensors", peft)
    cases.add(base, "sd3_peft.safetensors", peft)
    kohya = {}  # sd-scripts sd3 branch
    for i in (0, 23):
        add_lora(kohya, f"lora_unet_joint_blocks_{i}_x_block_attn_qkv", (3 * h, h), rng, alpha=2.0)
        add_lora(kohya, f"lora_unet_joint_blocks_{i}_x_block_mlp_fc1", (4 * h, h), rng, alpha=2.0)
    add_lora(kohya, "lora_unet_joint_blocks_0_context_block_attn_proj", (h, h), rng)
    add_lora(kohya, "lora_te1_text_model_encoder_layers_0_mlp_fc1", (48, 12), rng)
    add_lora(kohya, "lora_te2_text_model_encoder_layers_0_mlp_fc1", (32, 8), rng)
    add_lora(kohya, "lora_te3_encoder_block_0_layer_0_SelfAttention_q", (8, 8), rng)
    write_safetensors(f"{outdir}/sd3_kohya.safetensors", kohya)
    cases.add(base, "sd3_kohya.safetensors", kohya)
    onetrainer, patches = {}, []  # merged: q rows of qkv, fc1, an identity CLIP-L projection, CLIP-G's
    down, up = add_lora(onetrainer, "lora_transformer_transformer_blocks_3_attn_to_q", (h, h), rng)
    patches.append(("model.diffusion_model.joint_blocks.3.x_block.attn.qkv.weight", up @ down, 0, h))
    down, up = add_lora(onetrainer, "lora_transformer_transformer_blocks_3_ff_net_0_proj", (4 * h, h), rng)
    patches.append(("model.diffusion_model.joint_blocks.3.x_block.mlp.fc1.weight", up @ down, 0, None))
    down, up = add_lora(onetrainer, "lora_te1_text_projection", (12, 12), rng)
    patches.append(("text_encoders.clip_l.transformer.text_projection.weight", up @ down, 0, None))
    down, up = add_lora(onetrainer, "lora_te2_text_projection", (8, 8), rng)
    patches.append(("text_encoders.clip_g.transformer.text_projection.weight", up @ down, 0, None))
    write_safetensors(f"{outdir}/sd3_onetrainer.safetensors", onetrainer)
    cases.add(base, "sd3_onetrainer.safetensors", onetrainer)
    write_safetensors(f"{outdir}/expected_sd3_onetrainer.safetensors",
                      merge_rows(sd3_t, patches, 1.0,
                                 {"text_encoders.clip_l.transformer.text_projection.weight": np.eye(12, dtype=np.float32)}))


def flux(outdir, rng, cases):
    h, double, single = 16, 19, 38
    keys = layouts.flux(double, single, h)
    config = {"depth": double, "depth_single_blocks": single, "hidden_size": h}
    base, flux_t = dit_base(outdir, rng, "flux.safetensors", "flux", config, keys, "")
    # The same weights in diffusers' layout (q/k/v split out of qkv and linear1).
    fmap = comfy_answers.flux_to_diffusers(config)
    dif = {}
    for d, o in fmap.items():
        if any(x in d for x in ("linear_in", "linear_out", "to_qkv_mlp_proj", "attn.to_out.weight")):
            continue  # LyCORIS / Flux 2 aliases of weights already named
        key = o if isinstance(o, str) else o[0]
        if key not in flux_t:
            continue
        if isinstance(o, tuple) and o[1] is not None:
            _, start, rows = o[1]
            dif[d] = flux_t[key][start:start + rows]
        elif isinstance(o, tuple):  # swap_scale_shift: diffusers stores (scale, shift)
            shift, scale = np.split(flux_t[key], 2)
            dif[d] = np.concatenate([scale, shift])
        else:
            dif[d] = flux_t[key]
    write_safetensors(f"{outdir}/flux_diffusers.safetensors", dif)
    kohya = {}  # sd-scripts flux branch
    for i in (0, 18):
        add_lora(kohya, f"lora_unet_double_blocks_{i}_img_attn_qkv", (3 * h, h), rng, alpha=4.0)
        add_lora(kohya, f"lora_unet_double_blocks_{i}_txt_mlp_0", (4 * h, h), rng, alpha=4.0)
    for i in (0, 37):
        add_lora(kohya, f"lora_unet_single_blocks_{i}_linear1", (7 * h, h), rng, alpha=4.0)
        add_lora(kohya, f"lora_unet_single_blocks_{i}_linear2", (h, 5 * h), rng, alpha=4.0)
    add_lora(kohya, "lora_te1_text_model_encoder_layers_0_mlp_fc1", (48, 12), rng)
    write_safetensors(f"{outdir}/flux_kohya.safetensors", kohya)
    cases.add(base, "flux_kohya.safetensors", kohya)
    ait, patches = {}, []  # ai-toolkit / diffusers names, merged through ComfyUI's flux_to_diffusers windows

    def ait_lora(name, shape):
        down, up = add_lora(ait, name, shape, rng, forms=(".lora_A.weight", ".lora_B.weight"))
        target = fmap[name[len("transformer."):] + ".weight"]
        if isinstance(target, tuple):
            patches.append((target[0], up @ down, target[1][1], target[1][2]))
        else:
            patches.append((target, up @ down, 0, None))

    for i in (0, 7):
        for m in ("to_q", "to_k", "to_v", "to_out.0", "add_q_proj", "add_k_proj", "add_v_proj", "to_add_out"):
            ait_lora(f"transformer.transformer_blocks.{i}.attn.{m}", (h, h))
        ait_lora(f"transformer.transformer_blocks.{i}.ff.net.0.proj", (4 * h, h))
    for i in (0, 30):
        for m in ("attn.to_q", "attn.to_k", "attn.to_v"):
            ait_lora(f"transformer.single_transformer_blocks.{i}.{m}", (h, h))
        ait_lora(f"transformer.single_transformer_blocks.{i}.proj_mlp", (4 * h, h))
        ait_lora(f"transformer.single_transformer_blocks.{i}.proj_out", (h, 5 * h))
    write_safetensors(f"{outdir}/flux_aitoolkit.safetensors", ait)
    cases.add(base, "flux_aitoolkit.safetensors", ait)
    write_safetensors(f"{outdir}/expected_flux_aitoolkit.safetensors", merge_rows(flux_t, patches, 1.0))
    both = {}  # the same weights twice: a whole qkv and its q window; a projection by two names
    add_lora(both, "lora_unet_double_blocks_0_img_attn_qkv", (3 * h, h), rng)
    add_lora(both, "transformer.transformer_blocks.0.attn.to_q", (h, h), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    add_lora(both, "lora_unet_double_blocks_0_img_attn_proj", (h, h), rng)
    add_lora(both, "transformer.transformer_blocks.0.attn.to_out.0", (h, h), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    add_lora(both, "diffusion_model.single_blocks.1.linear1_qkv", (3 * h, h), rng)
    write_safetensors(f"{outdir}/flux_twice.safetensors", both)
    cases.add(base, "flux_twice.safetensors", both)


def wan(outdir, rng, cases):
    d, blocks = 16, 30
    keys = layouts.wan(blocks, d)
    base, wan_t = dit_base(outdir, rng, "wan.safetensors", "wan", {}, keys, "")
    write_safetensors(f"{outdir}/wan_diffusers.safetensors", {layouts.wan_to_diffusers(k): v for k, v in wan_t.items()})
    musubi = {}
    for i in range(blocks):
        for a in ("self_attn", "cross_attn"):
            for s in ("q", "k", "v", "o"):
                add_lora(musubi, f"lora_unet_blocks_{i}_{a}_{s}", (d, d), rng, rank=2, alpha=1.0)
        add_lora(musubi, f"lora_unet_blocks_{i}_ffn_0", (48, d), rng, rank=2, alpha=1.0)
        add_lora(musubi, f"lora_unet_blocks_{i}_ffn_2", (d, 48), rng, rank=2, alpha=1.0)
    write_safetensors(f"{outdir}/wan_musubi.safetensors", musubi)
    cases.add(base, "wan_musubi.safetensors", musubi)
    peft = {}  # diffusers names: ComfyUI has no Wan branch in model_lora_keys_unet
    for i in (0, 29):
        for m in ("attn1.to_q", "attn1.to_k", "attn2.to_v", "ffn.net.0.proj"):
            add_lora(peft, f"transformer.blocks.{i}.{m}", (48 if "ffn" in m else d, d), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    write_safetensors(f"{outdir}/wan_peft.safetensors", peft)
    cases.add(base, "wan_peft.safetensors", peft)
    orig = {}  # ai-toolkit / lightx2v: original names with diffusion_model., bias deltas, an i2v layer
    for i in (0, 1):
        for m in ("self_attn.q", "cross_attn.o", "ffn.2"):
            add_lora(orig, f"diffusion_model.blocks.{i}.{m}", (d, 48 if "ffn" in m else d), rng, forms=(".lora_A.weight", ".lora_B.weight"))
            orig[f"diffusion_model.blocks.{i}.{m}.diff_b"] = np.zeros(d, np.float32)
        orig[f"diffusion_model.blocks.{i}.norm3.diff"] = np.zeros(d, np.float32)
        orig[f"diffusion_model.blocks.{i}.self_attn.norm_q.diff"] = np.zeros(d, np.float32)
    add_lora(orig, "diffusion_model.blocks.0.cross_attn.k_img", (d, d), rng, forms=(".lora_A.weight", ".lora_B.weight"))
    add_lora(orig, "lycoris_blocks_2_self_attn_q", (d, d), rng)
    write_safetensors(f"{outdir}/wan_original.safetensors", orig)
    cases.add(base, "wan_original.safetensors", orig)


def qwen(outdir, rng, cases):
    d, blocks = 16, 60
    keys = layouts.qwen_image(blocks, d)
    base, _ = dit_base(outdir, rng, "qwen_image.safetensors", "qwen", {}, keys, "")
    musubi = {}
    for i in (0, 59):
        for m in ("attn_to_q", "attn_add_k_proj", "attn_to_out_0", "img_mlp_net_0_proj", "txt_mod_1"):
            add_lora(musubi, f"lora_unet_transformer_blocks_{i}_{m}", (6 * d if "mod" in m else 4 * d if "mlp" in m else d, d), rng, alpha=2.0)
    write_safetensors(f"{outdir}/qwen_musubi.safetensors", musubi)
    cases.add(base, "qwen_musubi.safetensors", musubi)
    peft = {}
    for i in (3, 40):
        for m in ("attn.to_q", "attn.to_add_out", "img_mlp.net.2"):
            add_lora(peft, f"transformer.transformer_blocks.{i}.{m}", (d, 4 * d if "mlp" in m else d), rng, forms=(".lora_A.weight", ".lora_B.weight"))
        add_lora(peft, f"diffusion_model.transformer_blocks.{i}.attn.to_k", (d, d), rng, forms=(".lora_A.weight", ".lora_B.weight"))
        add_lora(peft, f"transformer_blocks.{i}.attn.to_v", (d, d), rng, forms=(".lora_A.default.weight", ".lora_B.default.weight"))
    write_safetensors(f"{outdir}/qwen_peft.safetensors", peft)
    cases.add(base, "qwen_peft.safetensors", peft)


def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(1234)
    cases = Cases()
    sd_family(outdir, rng, cases)
    sd3(outdir, rng, cases)
    flux(outdir, rng, cases)
    wan(outdir, rng, cases)
    qwen(outdir, rng, cases)
    with open(f"{outdir}/comfy_cases.json", "w") as f:
        json.dump(cases.cases, f, indent=1, sort_keys=True)
    with open(f"{outdir}/comfy_models.json", "w") as f:
        json.dump(cases.models, f)


if __name__ == "__main__":
    main(sys.argv[1])
