#!/usr/bin/python3
"""Writes the merge cases of tests/unit/lora_merge_test.cpp: small bases (F16 / BF16 / F32),
LoRAs of every module type ComfyUI applies, and for each merge the result of ComfyUI's own
calculate_weight (recorded from a ComfyUI checkout by tests/data/record_comfy_answers.sh into
tests/fixtures/comfy_answers/calculate_weight.safetensors: float32, as ComfyUI's ModelPatcher
computes it), stored as F64 so the test can hold genscope to one unit in the last place of the
stored dtype.

usage: make_merge_cases.py OUTDIR        (fixed seed: the output is deterministic)
       make_merge_cases.py --seeds DIR  (tiny LoRAs of every type: the lora_delta fuzz seeds,
                                         committed in tests/fixtures/lora_delta/)

OUTDIR/cases.json lists the cases:
  merges:   {name, base, lora, strength, expected}              -> genscope merge_lora
  patchers: {name, base, lora, calls: [{strength, strength_model,
             targets: [{module, key, chunk, chunks, row_offset, rows, delta_row_offset,
                        bias_key, transpose}]}], expected}
                                                               -> genscope ModelPatcher
  targets:  {name, base, lora, strength, expected, shadowed: [[module, by]], new: {key: dtype}}
            merges through fit_lora onto bases with complete key sets (tests/data/layouts.py:
            SDXL with an OpenCLIP tower, Flux in its own and in diffusers' layout): transposed,
            identity-initialised, chunked and windowed weights, slices of a fused delta, bias
            patches, a shadowed module; the targets are written below as ComfyUI's key maps
            give them (not taken from genscope)        -> genscope merge_lora
  errors:   {name, base, lora, error, names}                   -> merge_lora must refuse
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import comfy_answers  # noqa: E402
import layouts  # noqa: E402
from make_models import write_safetensors_raw  # noqa: E402

# ------------------------------------------------------------------ safetensors by hand ----
def bf16_round(x):
    """float64 -> the float32 value of its bfloat16 rounding (nearest even)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)


class T:
    """A tensor and the dtype it is stored as ("F16", "BF16", "F32", "F64")."""

    def __init__(self, value, dtype="F32"):
        v = np.asarray(value, dtype=np.float64)
        if dtype == "F16":
            v = v.astype(np.float16).astype(np.float64)
        elif dtype == "BF16":
            v = bf16_round(v).astype(np.float64)
        elif dtype == "F32":
            v = v.astype(np.float32).astype(np.float64)
        self.value, self.dtype = v, dtype  # value: exactly what the file holds, as float64

    def data(self):
        if self.dtype == "F16":
            return self.value.astype(np.float16).tobytes()
        if self.dtype == "BF16":
            return (self.value.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()
        if self.dtype == "F32":
            return self.value.astype(np.float32).tobytes()
        return self.value.astype(np.float64).tobytes()


def write(path, tensors):
    write_safetensors_raw(path, {name: (t.dtype, t.value.shape, t.data()) for name, t in tensors.items()})


# ------------------------------------------------------------- ComfyUI's results ----
def calculate(name, base, lora, calls):
    """Every tensor of `base` after the merge: those the LoRA patches as ComfyUI's
    calculate_weight computed them (recorded from its own code: tests/data/comfy_answers.py),
    the others as they are.
    calls: [(strength, strength_model, [target dicts])]: ModelPatcher.add_patches per target,
    in order (tests/data/comfy_live.py calculate_weight describes the target fields)."""
    patched = comfy_answers.calculate_weight(name, {k: (t.dtype, t.value) for k, t in base.items()},
                                             {k: (t.dtype, t.value) for k, t in lora.items()}, calls)
    return {**{k: v.value for k, v in base.items()}, **patched}


SUFFIXES = (".lora_magnitude_vector", ".lora_up.weight", ".lora_down.weight", ".lora_mid.weight", ".lora_A.weight",
            ".lora_B.weight", ".alpha", ".dora_scale")


def module_of(key):
    for s in SUFFIXES:
        if key.endswith(s):
            return key[:-len(s)]
    return key.rsplit(".", 1)[0]  # hada_*, lokr_*, diff, w_norm, set_weight, ...


def rnd(rng, shape, scale):
    return rng.standard_normal(shape) * scale


# ------------------------------------------------------------------------------ cases ----
def main(outdir):
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(20240917)
    U = "model.diffusion_model."
    B = U + "input_blocks.1.1.transformer_blocks.0."
    base = {
        U + "input_blocks.1.0.in_layers.2.weight": T(rnd(rng, (8, 6, 3, 3), 0.1), "F16"),
        U + "input_blocks.1.0.in_layers.2.bias": T(rnd(rng, (8,), 0.1), "F16"),
        U + "input_blocks.1.0.out_layers.3.weight": T(rnd(rng, (8, 8, 3, 3), 0.1), "BF16"),
        U + "input_blocks.1.0.out_layers.3.bias": T(rnd(rng, (8,), 0.1), "BF16"),
        U + "input_blocks.1.1.norm.weight": T(1 + rnd(rng, (16,), 0.1), "F32"),
        U + "input_blocks.1.1.norm.bias": T(rnd(rng, (16,), 0.1), "F32"),
        U + "input_blocks.1.1.proj_in.weight": T(rnd(rng, (16, 16, 1, 1), 0.1), "F16"),
        U + "input_blocks.1.1.proj_in.bias": T(rnd(rng, (16,), 0.1), "F16"),
        B + "attn1.to_q.weight": T(rnd(rng, (16, 16), 0.1), "F16"),
        B + "attn1.to_k.weight": T(rnd(rng, (16, 16), 0.1), "F16"),
        B + "attn1.to_v.weight": T(rnd(rng, (16, 16), 0.1), "F32"),
        B + "attn1.to_out.0.weight": T(rnd(rng, (16, 16), 0.1), "F16"),
        B + "attn1.to_out.0.bias": T(rnd(rng, (16,), 0.1), "F16"),
        B + "attn2.to_k.weight": T(rnd(rng, (16, 24), 0.1), "BF16"),
        B + "attn2.to_v.weight": T(rnd(rng, (16, 24), 0.1), "F16"),
        # Large enough for the fused kernel to split its rows over threads and for the writer
        # to take it in two parts (5 MiB of F16, parts of 4 MiB).
        B + "ff.net.0.proj.weight": T(rnd(rng, (2560, 1024), 0.05), "F16"),
        B + "ff.net.2.weight": T(rnd(rng, (16, 64), 0.1), "F16"),
        "cond_stage_model.transformer.text_model.final_layer_norm.weight": T(1 + rnd(rng, (12,), 0.1), "F16"),
    }
    # Around them, the rest of an SD1.5 checkpoint's keys (tests/data/layouts.py), so that the
    # loader profile recognises the model as ComfyUI would (its key maps come from the model).
    layout = [(U + l, s) for l, d, s in layouts.unet(**SD15)]
    layout += [k[:2] for k in layouts.clip_hf("cond_stage_model.transformer.text_model.", 12, 12)]
    base = {**{k: T(rnd(rng, s, 0.1), "F16") for k, s in layout if k not in base}, **base}
    write(f"{outdir}/merge_base.safetensors", base)
    k = lambda key: "lora_unet_" + key[len(U):-len(".weight")].replace(".", "_")
    cases = {"merges": [], "patchers": [], "errors": []}

    def merge_case(name, lora, strength):
        write(f"{outdir}/{name}.safetensors", lora)
        targets = sorted({module_of(n) for n in lora})
        keys = {k(key): key for key in base if key.endswith(".weight") and key.startswith(U)}
        keys.update({key[len("model."):-len(".weight")]: key for key in base
                     if key.startswith(U) and key.endswith(".weight")})
        calls = [(strength, 1.0, [{"module": t, "key": keys[t]} for t in targets])]
        expected = calculate(name, base, lora, calls)
        write(f"{outdir}/{name}_expected.safetensors", {n: T(v, "F64") for n, v in expected.items()})
        cases["merges"].append({"name": name, "base": "merge_base.safetensors", "lora": f"{name}.safetensors",
                                "strength": strength, "expected": f"{name}_expected.safetensors"})

    conv_in = U + "input_blocks.1.0.in_layers.2.weight"
    conv_out = U + "input_blocks.1.0.out_layers.3.weight"
    proj_in = U + "input_blocks.1.1.proj_in.weight"
    # ---- plain LoRA: fused path (threads, conv kernel flattened), alpha 0 / none, PEFT DoRA ----
    lora = {
        k(B + "ff.net.0.proj.weight") + ".lora_up.weight": T(rnd(rng, (2560, 16), 0.2), "F16"),
        k(B + "ff.net.0.proj.weight") + ".lora_down.weight": T(rnd(rng, (16, 1024), 0.2), "F16"),
        k(B + "ff.net.0.proj.weight") + ".alpha": T(8.0, "F32"),
        k(B + "attn1.to_q.weight") + ".lora_up.weight": T(rnd(rng, (16, 4), 0.2)),
        k(B + "attn1.to_q.weight") + ".lora_down.weight": T(rnd(rng, (4, 16), 0.2)),
        k(B + "attn1.to_q.weight") + ".alpha": T(0.0),  # ComfyUI: alpha / rank = 0
        k(B + "attn1.to_k.weight") + ".lora_up.weight": T(rnd(rng, (16, 4), 0.2), "BF16"),
        k(B + "attn1.to_k.weight") + ".lora_down.weight": T(rnd(rng, (4, 16), 0.2), "BF16"),
        k(conv_in) + ".lora_up.weight": T(rnd(rng, (8, 4, 1, 1), 0.2)),
        k(conv_in) + ".lora_down.weight": T(rnd(rng, (4, 6, 3, 3), 0.2)),
        k(conv_in) + ".alpha": T(2.0),
        "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.lora_A.weight": T(rnd(rng, (4, 24), 0.2)),
        "diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_k.lora_B.weight": T(rnd(rng, (16, 4), 0.2)),
    }
    merge_case("m_lora", lora, 0.7)
    # PEFT DoRA: ComfyUI reads lora_A/lora_B and ignores lora_magnitude_vector, so it applies a
    # plain LoRA the trainer did not mean; merge_lora refuses it (the "errors" cases below).
    peft_dora = {k.replace("attn2.to_k", "attn2.to_v"): T(rnd(rng, v.value.shape, 0.2)) for k, v in lora.items()
                 if "attn2.to_k" in k}
    peft_dora["diffusion_model.input_blocks.1.1.transformer_blocks.0.attn2.to_v.lora_magnitude_vector"] = \
        T(1 + rnd(rng, (16,), 0.1))

    # ---- LoCon with a Tucker mid ----
    merge_case("m_locon_mid", {
        k(conv_in) + ".lora_up.weight": T(rnd(rng, (8, 4, 1, 1), 0.3)),
        k(conv_in) + ".lora_mid.weight": T(rnd(rng, (4, 4, 3, 3), 0.3)),
        k(conv_in) + ".lora_down.weight": T(rnd(rng, (4, 6, 1, 1), 0.3), "F16"),
        k(conv_in) + ".alpha": T(3.0),
    }, 0.9)

    # ---- LoHa: plain on a linear, Tucker (hada_t1/t2) on a 3×3 conv ----
    merge_case("m_loha", {
        k(B + "attn1.to_v.weight") + ".hada_w1_a": T(rnd(rng, (16, 2), 0.3)),
        k(B + "attn1.to_v.weight") + ".hada_w1_b": T(rnd(rng, (2, 16), 0.3)),
        k(B + "attn1.to_v.weight") + ".hada_w2_a": T(rnd(rng, (16, 2), 0.3)),
        k(B + "attn1.to_v.weight") + ".hada_w2_b": T(rnd(rng, (2, 16), 0.3)),
        k(B + "attn1.to_v.weight") + ".alpha": T(1.0),
        k(conv_out) + ".hada_w1_a": T(rnd(rng, (3, 8), 0.4)),
        k(conv_out) + ".hada_w1_b": T(rnd(rng, (3, 8), 0.4)),
        k(conv_out) + ".hada_t1": T(rnd(rng, (3, 3, 3, 3), 0.4)),
        k(conv_out) + ".hada_w2_a": T(rnd(rng, (3, 8), 0.4), "F16"),
        k(conv_out) + ".hada_w2_b": T(rnd(rng, (3, 8), 0.4)),
        k(conv_out) + ".hada_t2": T(rnd(rng, (3, 3, 3, 3), 0.4)),
        k(conv_out) + ".alpha": T(1.5),
    }, 0.8)

    # ---- LoKr: decomposed w1 with whole w2, both whole (no alpha). No Tucker LoKr (lokr_t2):
    # ComfyUI cannot apply one (its torch.kron of the einsum's non-contiguous result raises
    # "view size is not compatible", ComfyUI logs "ERROR lokr" and leaves the weight), so there
    # is no ComfyUI answer to test genscope's merge of it against (docs/lora.md). ----
    merge_case("m_lokr", {
        k(B + "attn1.to_out.0.weight") + ".lokr_w1_a": T(rnd(rng, (4, 2), 0.5)),
        k(B + "attn1.to_out.0.weight") + ".lokr_w1_b": T(rnd(rng, (2, 4), 0.5)),
        k(B + "attn1.to_out.0.weight") + ".lokr_w2": T(rnd(rng, (4, 4), 0.5)),
        k(B + "attn1.to_out.0.weight") + ".alpha": T(4.0),
        k(B + "ff.net.2.weight") + ".lokr_w1": T(rnd(rng, (4, 8), 0.3)),
        k(B + "ff.net.2.weight") + ".lokr_w2": T(rnd(rng, (4, 8), 0.3)),
    }, 0.6)

    # ---- DoRA (kohya/LyCORIS dora_scale) on both norm axes, LoRA / LoHa / LoKr ----
    dora = {
        k(B + "attn1.to_q.weight") + ".lora_up.weight": T(rnd(rng, (16, 4), 0.3)),
        k(B + "attn1.to_q.weight") + ".lora_down.weight": T(rnd(rng, (4, 16), 0.3)),
        k(B + "attn1.to_q.weight") + ".alpha": T(2.0),
        k(B + "attn1.to_q.weight") + ".dora_scale": T(0.4 + np.abs(rnd(rng, (16, 1), 0.1))),  # output axis
        k(B + "attn2.to_v.weight") + ".lora_up.weight": T(rnd(rng, (16, 4), 0.3)),
        k(B + "attn2.to_v.weight") + ".lora_down.weight": T(rnd(rng, (4, 24), 0.3)),
        k(B + "attn2.to_v.weight") + ".dora_scale": T(0.3 + np.abs(rnd(rng, (1, 24), 0.1)), "F16"),  # input axis
        k(conv_out) + ".hada_w1_a": T(rnd(rng, (8, 2), 0.3)),
        k(conv_out) + ".hada_w1_b": T(rnd(rng, (2, 72), 0.3)),
        k(conv_out) + ".hada_w2_a": T(rnd(rng, (8, 2), 0.3)),
        k(conv_out) + ".hada_w2_b": T(rnd(rng, (2, 72), 0.3)),
        k(conv_out) + ".dora_scale": T(0.5 + np.abs(rnd(rng, (1, 8, 1, 1), 0.1))),  # input axis, conv
        k(proj_in) + ".lokr_w1": T(rnd(rng, (4, 4), 0.3)),
        k(proj_in) + ".lokr_w2": T(rnd(rng, (4, 4, 1, 1), 0.3)),
        k(proj_in) + ".dora_scale": T(0.4 + np.abs(rnd(rng, (16, 1, 1, 1), 0.1))),  # output axis, conv
    }
    merge_case("m_dora", dora, 0.6)
    merge_case("m_dora_full", dict(dora), 1.0)

    # ---- full patches: diff, w_norm, set_weight (strength unused) ----
    merge_case("m_full", {
        k(B + "attn1.to_k.weight") + ".diff": T(rnd(rng, (16, 16), 0.01)),
        k(U + "input_blocks.1.1.norm.weight") + ".w_norm": T(rnd(rng, (16,), 0.05)),
        k(B + "attn1.to_out.0.weight") + ".set_weight": T(rnd(rng, (16, 16), 0.1), "F16"),
    }, 0.5)

    # ---- ModelPatcher with hand-built targets: bias_key, transpose, chunks, strength_model ----
    pbase = {
        "lin.weight": T(rnd(rng, (16, 12), 0.1), "F16"),
        "lin.bias": T(rnd(rng, (16,), 0.1), "F16"),
        "norm.weight": T(1 + rnd(rng, (16,), 0.1), "F32"),
        "norm.bias": T(rnd(rng, (16,), 0.1), "F32"),
        "proj": T(rnd(rng, (12, 16), 0.1), "F16"),  # stored [in, out]; ComfyUI patches its transpose
        "qkv.weight": T(rnd(rng, (48, 8), 0.1), "BF16"),
        "zero.weight": T(np.zeros((4, 6)), "F32"),  # DoRA's row norms are 0 + eps here
    }
    write(f"{outdir}/patch_base.safetensors", pbase)
    plora = {
        "m_diff.diff": T(rnd(rng, (16, 12), 0.02)), "m_diff.diff_b": T(rnd(rng, (16,), 0.02)),
        "m_norm.w_norm": T(rnd(rng, (16,), 0.05)), "m_norm.b_norm": T(rnd(rng, (16,), 0.05)),
        "m_bnorm_only.b_norm": T(rnd(rng, (16,), 0.05)),  # no w_norm: ComfyUI loads nothing
        "m_bias_only.diff_b": T(rnd(rng, (16,), 0.02)),
        "m_proj.lora_up.weight": T(rnd(rng, (16, 4), 0.3)), "m_proj.lora_down.weight": T(rnd(rng, (4, 12), 0.3)),
        "m_proj.alpha": T(2.0),
        "m_proj_dora.lora_up.weight": T(rnd(rng, (16, 2), 0.3)),
        "m_proj_dora.lora_down.weight": T(rnd(rng, (2, 12), 0.3)),
        "m_proj_dora.dora_scale": T(0.4 + np.abs(rnd(rng, (16, 1), 0.1))),
    }
    plora["m_zero.lora_up.weight"] = T(rnd(rng, (4, 2), 0.3))
    plora["m_zero.lora_down.weight"] = T(rnd(rng, (2, 6), 0.3))
    plora["m_zero.dora_scale"] = T(0.4 + np.abs(rnd(rng, (4, 1), 0.1)))
    for s in ("q", "k", "v"):
        plora[f"m_{s}.lora_up.weight"] = T(rnd(rng, (16, 2), 0.3))
        plora[f"m_{s}.lora_down.weight"] = T(rnd(rng, (2, 8), 0.3))
    write(f"{outdir}/p_lora.safetensors", plora)
    calls = [
        (0.8, 1.0, [{"module": "m_diff", "key": "lin.weight", "bias_key": "lin.bias"},
                    {"module": "m_norm", "key": "norm.weight", "bias_key": "norm.bias"},
                    {"module": "m_bnorm_only", "key": "norm.weight", "bias_key": "norm.bias"},
                    {"module": "m_bias_only", "key": "lin.weight", "bias_key": "lin.bias"},
                    {"module": "m_proj", "key": "proj", "transpose": True},
                    {"module": "m_proj_dora", "key": "proj", "transpose": True},
                    {"module": "m_zero", "key": "zero.weight"}]),
        (1.2, 0.9, [{"module": f"m_{s}", "key": "qkv.weight", "chunk": i, "chunks": 3}
                    for i, s in enumerate(("q", "k", "v"))] +
         [{"module": "m_bias_only", "key": "lin.weight", "bias_key": "lin.bias"}]),
    ]
    expected = calculate("p_targets", pbase, plora, calls)
    write(f"{outdir}/p_expected.safetensors", {n: T(v, "F64") for n, v in expected.items()})
    cases["patchers"].append({
        "name": "targets", "base": "patch_base.safetensors", "lora": "p_lora.safetensors",
        "calls": [{"strength": s, "strength_model": sm,
                   "targets": [{"module": t["module"], "key": t["key"], "chunk": t.get("chunk", 0),
                                "chunks": t.get("chunks", 1), "bias_key": t.get("bias_key", ""),
                                "transpose": t.get("transpose", False)} for t in ts]} for s, sm, ts in calls],
        "expected": "p_expected.safetensors"})

    # ---- malformed modules: each merge must refuse with the named error, writing nothing ----
    def error_case(name, lora, error, names):
        write(f"{outdir}/{name}.safetensors", lora)
        cases["errors"].append({"name": name, "base": "merge_base.safetensors", "lora": f"{name}.safetensors",
                                "error": error, "names": names})

    m = k(conv_out)
    loha_t = {m + ".hada_w1_a": T(rnd(rng, (3, 8), 0.3)), m + ".hada_w1_b": T(rnd(rng, (3, 8), 0.3)),
              m + ".hada_t1": T(rnd(rng, (3, 3, 3, 3), 0.3)), m + ".hada_w2_a": T(rnd(rng, (3, 8), 0.3)),
              m + ".hada_w2_b": T(rnd(rng, (3, 8), 0.3))}
    error_case("e_loha_no_t2", loha_t, "LoraMissingHalf", "hada_t2")
    error_case("e_peft_dora", peft_dora, "LoraUnsupported", "attn2.to_v")
    bad = dict(loha_t)
    bad[m + ".hada_t2"] = T(rnd(rng, (3, 2, 3, 3), 0.3))
    error_case("e_loha_t2_rank", bad, "LoraRankMismatch", "hada_t2")
    q = k(B + "attn1.to_q.weight")
    error_case("e_dora_shape", {q + ".lora_up.weight": T(rnd(rng, (16, 4), 0.3)),
                                q + ".lora_down.weight": T(rnd(rng, (4, 16), 0.3)),
                                q + ".dora_scale": T(np.ones((5, 1)))}, "LoraShapeMismatch", "dora_scale")
    error_case("e_lokr_t2_dims", {k(conv_in) + ".lokr_w1": T(rnd(rng, (2, 2), 0.3)),
                                  k(conv_in) + ".lokr_w2_a": T(rnd(rng, (2, 4), 0.3)),
                                  k(conv_in) + ".lokr_w2_b": T(rnd(rng, (2, 27), 0.3)),
                                  k(conv_in) + ".lokr_t2": T(rnd(rng, (2, 2, 9), 0.3))}, "LoraRankMismatch", "lokr_t2")
    # A diff must have the weight's exact shape (ComfyUI: "WEIGHT NOT MERGED" otherwise).
    error_case("e_diff_shape", {k(B + "attn1.to_k.weight") + ".diff": T(rnd(rng, (16, 4, 4), 0.01))},
               "LoraShapeMismatch", "attn1_to_k")
    nan = rnd(rng, (16, 16), 0.1)
    nan[2, 3] = np.nan
    error_case("e_set_nan", {k(B + "attn1.to_out.0.weight") + ".set_weight": T(nan)}, "LoraNaN", "set_weight")

    target_cases(outdir, rng, cases, error_case)
    with open(f"{outdir}/cases.json", "w") as f:
        json.dump(cases, f, indent=1)


SD15 = dict(mc=8, mult=[1, 2, 4, 4], nres=2, depth_in=[1, 1, 1, 0], depth_mid=1, depth_out=[1, 1, 1, 0],
            ctx=12, temb=16, adm=0, linear=False)  # as tests/data/make_models.py
SDXL = dict(mc=12, mult=[1, 2, 4], nres=2, depth_in=[0, 2, 10], depth_mid=10, depth_out=[0, 2, 10],
            ctx=20, temb=24, adm=32, linear=True)  # as tests/data/make_models.py


def target_cases(outdir, rng, cases, error_case):
    """Merges through fit_lora whose targets use every LoraKeyTarget field. Each target below
    is what ComfyUI's model_lora_keys_unet / model_lora_keys_clip give the name (comfy/lora.py;
    comfy/utils.py flux_to_diffusers; comfy/sd1_clip.py / clip_model.py for the projections)."""
    lp = lambda shape, rank=4, s=0.3: (T(rnd(rng, (shape[0], rank), s)), T(rnd(rng, (rank, shape[1]), s)))

    def lora(out, name, shape, rank=4, alpha=None, forms=(".lora_up.weight", ".lora_down.weight")):
        out[name + forms[0]], out[name + forms[1]] = lp(shape, rank)
        if alpha is not None:
            out[name + ".alpha"] = T(alpha)

    def case(name, base_file, base, lora_t, strength, targets, shadowed=(), new=None):
        write(f"{outdir}/{name}.safetensors", lora_t)
        expected = calculate(name, base, lora_t, [(strength, 1.0, targets)])
        write(f"{outdir}/{name}_expected.safetensors", {n: T(v, "F64") for n, v in expected.items()})
        cases["targets"].append({"name": name, "base": base_file, "lora": f"{name}.safetensors", "strength": strength,
                                 "expected": f"{name}_expected.safetensors", "shadowed": [list(x) for x in shadowed],
                                 "new": new or {}})

    cases["targets"] = []
    # ---- SDXL (ldm): CLIP-L in HF layout without text_projection, OpenCLIP-bigG ----
    te1 = "conditioner.embedders.0.transformer."
    te2 = "conditioner.embedders.1.model."
    keys = [("model.diffusion_model." + l, s) for l, d, s in layouts.unet(**SDXL)]
    keys += [k[:2] for k in layouts.clip_hf(te1 + "text_model.", 12, 12)]
    keys += [k[:2] for k in layouts.open_clip(te2, 32, 8)]
    xl = {k: T(rnd(rng, s, 0.1) + (1 if k.endswith("logit_scale") else 0), "F16") for k, s in keys}
    write(f"{outdir}/t_sdxl.safetensors", xl)
    t, targets = {}, []
    # OpenCLIP's text_projection is stored for x @ P; ComfyUI loads it transposed
    # (clip_text_transformers_convert) and patches that: a DoRA on the transposed weight.
    lora(t, "lora_te2_text_projection", (8, 8), alpha=2.0)
    t["lora_te2_text_projection.dora_scale"] = T(1 + rnd(rng, (8, 1), 0.2))
    targets.append({"module": "lora_te2_text_projection", "key": te2 + "text_projection", "transpose": True})
    # CLIP-L has no text_projection in the file; ComfyUI patches its identity-initialised one.
    lora(t, "lora_te1_text_projection", (12, 12))
    targets.append({"module": "lora_te1_text_projection", "key": te1 + "text_projection.weight", "identity": 12})
    # q/k/v of the fused in_proj_weight: a LoKr on the k chunk, a plain LoRA on v.
    k_mod = "lora_te2_text_model_encoder_layers_3_self_attn_k_proj"
    t[k_mod + ".lokr_w1"] = T(rnd(rng, (2, 2), 0.3))
    t[k_mod + ".lokr_w2_a"] = T(rnd(rng, (4, 2), 0.3))
    t[k_mod + ".lokr_w2_b"] = T(rnd(rng, (2, 4), 0.3))
    t[k_mod + ".alpha"] = T(1.0)
    targets.append({"module": k_mod, "key": te2 + "transformer.resblocks.3.attn.in_proj_weight", "chunk": 1, "chunks": 3})
    v_mod = "lora_te2_text_model_encoder_layers_3_self_attn_v_proj"
    lora(t, v_mod, (8, 8), alpha=1.0)
    targets.append({"module": v_mod, "key": te2 + "transformer.resblocks.3.attn.in_proj_weight", "chunk": 2, "chunks": 3})
    # diff + diff_b: the weight and "<module>.bias"; a diff_b alone patches only the bias.
    fc1 = "lora_te1_text_model_encoder_layers_0_mlp_fc1"
    t[fc1 + ".diff"] = T(rnd(rng, (48, 12), 0.01))
    t[fc1 + ".diff_b"] = T(rnd(rng, (48,), 0.01))
    p = te1 + "text_model.encoder.layers."
    targets.append({"module": fc1, "key": p + "0.mlp.fc1.weight", "bias_key": p + "0.mlp.fc1.bias"})
    fc2 = "lora_te1_text_model_encoder_layers_1_mlp_fc2"
    t[fc2 + ".diff_b"] = T(rnd(rng, (12,), 0.01))
    targets.append({"module": fc2, "key": p + "1.mlp.fc2.bias", "bias_key": p + "1.mlp.fc2.bias"})
    case("t_sdxl_targets", "t_sdxl.safetensors", xl, t, 0.7, targets, new={te1 + "text_projection.weight": "F16"})

    # ---- Flux, its own layout (bare keys): offset patches of the fused qkv ----
    h = 16
    config = {"depth": 19, "depth_single_blocks": 38, "hidden_size": h}
    fkeys = layouts.flux(19, 38, h)
    flux = {k: T(rnd(rng, s, 0.1), "F16") for k, s in fkeys}
    write(f"{outdir}/t_flux.safetensors", flux)
    t, targets = {}, []
    qkv = "double_blocks.0.img_attn.qkv.weight"
    q = "transformer.transformer_blocks.0.attn.to_q"  # -> qkv rows [0, h)
    t[q + ".hada_w1_a"], t[q + ".hada_w1_b"] = lp((h, h), 3)
    t[q + ".hada_w2_a"], t[q + ".hada_w2_b"] = lp((h, h), 3)
    t[q + ".alpha"] = T(1.5)
    targets.append({"module": q, "key": qkv, "row_offset": 0, "rows": h})
    k_ = "transformer.transformer_blocks.0.attn.to_k"  # -> rows [h, 2h), DoRA over the window
    lora(t, k_, (h, h), alpha=2.0)
    t[k_ + ".dora_scale"] = T(1 + rnd(rng, (h, 1), 0.2))
    targets.append({"module": k_, "key": qkv, "row_offset": h, "rows": h})
    v = "transformer.transformer_blocks.0.attn.to_v"  # -> rows [2h, 3h), PEFT names
    lora(t, v, (h, h), forms=(".lora_B.weight", ".lora_A.weight"))
    targets.append({"module": v, "key": qkv, "row_offset": 2 * h, "rows": h})
    # One weight by two names: ComfyUI keeps the later one of its key map (the diffusers
    # name, added after the lora_unet_ names) and drops the other.
    lora(t, "lora_unet_double_blocks_0_img_attn_proj", (h, h))
    proj = "transformer.transformer_blocks.0.attn.to_out.0"
    lora(t, proj, (h, h), forms=(".lora_B.weight", ".lora_A.weight"))
    targets.append({"module": proj, "key": "double_blocks.0.img_attn.proj.weight"})
    b1 = "lora_unet_double_blocks_1_img_attn_proj"
    t[b1 + ".diff"] = T(rnd(rng, (h, h), 0.01))
    t[b1 + ".diff_b"] = T(rnd(rng, (h,), 0.01))
    targets.append({"module": b1, "key": "double_blocks.1.img_attn.proj.weight",
                    "bias_key": "double_blocks.1.img_attn.proj.bias"})
    case("t_flux_windows", "t_flux.safetensors", flux, t, 0.8, targets,
         shadowed=[("lora_unet_double_blocks_0_img_attn_proj", proj)])

    # ---- the same Flux in diffusers' layout: a fused kohya delta lands in slices ----
    fmap = comfy_answers.flux_to_diffusers(config)
    dif, pieces = {}, {}
    for d, o in fmap.items():
        if any(x in d for x in ("linear_in", "linear_out", "to_qkv_mlp_proj", "attn.to_out.weight")):
            continue  # LyCORIS / Flux 2 aliases of weights already named
        key = o if isinstance(o, str) else o[0]
        if key not in flux or (isinstance(o, tuple) and o[1] is None):
            continue  # swap_scale_shift tensors: not needed here
        if isinstance(o, tuple):
            _, start, rows = o[1]
            dif[d] = T(flux[key].value[start:start + rows], "BF16")
            pieces.setdefault(key, []).append((d, start, rows))
        else:
            dif[d] = T(flux[key].value, "BF16")
    write(f"{outdir}/t_flux_diffusers.safetensors", dif)
    t, targets = {}, []

    def fused(module, key, shape):
        for d, start, rows in sorted(pieces[key], key=lambda x: x[1]):
            targets.append({"module": module, "key": d, "row_offset": 0, "rows": rows,
                            "delta_row_offset": start, "delta_shape": list(shape)})

    lora(t, "lora_unet_double_blocks_0_img_attn_qkv", (3 * h, h), alpha=2.0)
    fused("lora_unet_double_blocks_0_img_attn_qkv", "double_blocks.0.img_attn.qkv.weight", (3 * h, h))
    lora(t, "lora_unet_single_blocks_0_linear1", (7 * h, h), rank=8)
    fused("lora_unet_single_blocks_0_linear1", "single_blocks.0.linear1.weight", (7 * h, h))
    t["lora_unet_double_blocks_1_txt_attn_qkv.diff"] = T(rnd(rng, (3 * h, h), 0.01))
    fused("lora_unet_double_blocks_1_txt_attn_qkv", "double_blocks.1.txt_attn.qkv.weight", (3 * h, h))
    case("t_flux_slices", "t_flux_diffusers.safetensors", dif, t, 0.9, targets)
    # A DoRA cannot be split by rows: refused by name, nothing written.
    bad = {}
    lora(bad, "lora_unet_double_blocks_2_img_attn_qkv", (3 * h, h))
    bad["lora_unet_double_blocks_2_img_attn_qkv.dora_scale"] = T(np.ones((3 * h, 1)))
    write(f"{outdir}/e_slice_dora.safetensors", bad)
    cases["errors"].append({"name": "e_slice_dora", "base": "t_flux_diffusers.safetensors",
                            "lora": "e_slice_dora.safetensors", "error": "LoraUnsupported",
                            "names": "lora_unet_double_blocks_2_img_attn_qkv"})


def seeds(outdir):
    """One tiny file per module type (< 1 KB each), for tests/fuzz/lora_delta_fuzz.cpp."""
    os.makedirs(outdir, exist_ok=True)
    rng = np.random.default_rng(7)
    r = lambda *shape: T(rnd(rng, shape, 0.3))
    files = {
        "lora": {"a.lora_up.weight": r(4, 2), "a.lora_down.weight": r(2, 3), "a.alpha": T(1.0)},
        "locon_mid": {"a.lora_up.weight": r(3, 2, 1, 1), "a.lora_mid.weight": r(2, 2, 3, 3),
                      "a.lora_down.weight": r(2, 2, 1, 1), "a.alpha": T(2.0)},
        "loha": {"a.hada_w1_a": r(4, 2), "a.hada_w1_b": r(2, 3), "a.hada_w2_a": r(4, 2), "a.hada_w2_b": r(2, 3)},
        "loha_tucker": {"a.hada_w1_a": r(2, 3), "a.hada_w1_b": r(2, 2), "a.hada_t1": r(2, 2, 3, 3),
                        "a.hada_w2_a": r(2, 3), "a.hada_w2_b": r(2, 2), "a.hada_t2": r(2, 2, 3, 3)},
        "lokr_tucker": {"a.lokr_w1": r(2, 2), "a.lokr_w2_a": r(2, 2), "a.lokr_w2_b": r(2, 3),
                        "a.lokr_t2": r(2, 2, 3, 3), "a.alpha": T(1.0)},
        "lokr": {"a.lokr_w1_a": r(2, 1), "a.lokr_w1_b": r(1, 2), "a.lokr_w2": r(3, 2)},
        "dora": {"a.lora_up.weight": r(4, 2), "a.lora_down.weight": r(2, 3), "a.dora_scale": r(1, 3),
                 "b.lora_up.weight": r(4, 2), "b.lora_down.weight": r(2, 3), "b.dora_scale": r(4, 1)},
        "full": {"a.diff": r(4, 3), "a.diff_b": r(4), "b.w_norm": r(5), "b.b_norm": r(5), "c.set_weight": r(2, 2)},
    }
    for name, tensors in files.items():
        write(f"{outdir}/{name}.safetensors", tensors)


if __name__ == "__main__":
    if sys.argv[1] == "--seeds":
        seeds(sys.argv[2])
    else:
        main(sys.argv[1])
