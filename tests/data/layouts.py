"""Model structures for the test-data generator: every weight of each model, generated from
the model's structure (block counts, which layers exist where) the way the model classes
register them, with tiny widths. Names are the original (ComfyUI-native) ones; the
diffusers-layout conversions are at the end.

Sources of the structures: CompVis/Stability ldm UNet and AutoencoderKL (sgm), OpenAI CLIP
(HF CLIPTextModel) and OpenCLIP, T5 encoder (HF T5EncoderModel), SD3 MMDiT (sd3 mmdit.py:
joint_blocks, the last context block pre_only), Flux (flux model.py: double_blocks /
single_blocks, guidance_in for dev), Wan 2.1 (wan/modules/model.py: blocks with self_attn,
cross_attn, norm3, ffn, modulation), Qwen-Image (transformer_blocks with img/txt streams).
"""

RESNET = [("in_layers.0", "norm1"), ("in_layers.2", "conv1"), ("emb_layers.1", "time_emb_proj"),
          ("out_layers.0", "norm2"), ("out_layers.3", "conv2"), ("skip_connection", "conv_shortcut")]


class Builder:
    def __init__(self):
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


def unet(mc, mult, nres, depth_in, depth_mid, depth_out, ctx, temb, adm, linear):
    """ldm UNetModel; depth_in[level] / depth_out[level]: transformer depth of that level."""
    b = Builder()
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


def comfy_unet_config(nres, mult, depth_in, depth_mid, depth_out):
    """ComfyUI's unet_config fields unet_to_diffusers reads (transformer_depth_output in
    ComfyUI's order: by level, input order; unet_to_diffusers pops from the end)."""
    td = [depth_in[x] for x in range(len(mult)) for _ in range(nres)]
    tdo = [depth_out[x] for x in range(len(mult)) for _ in range(nres + 1)]
    return {"num_res_blocks": [nres] * len(mult), "channel_mult": list(mult), "transformer_depth": td,
            "transformer_depth_output": tdo, "transformer_depth_middle": depth_mid}


CLIP_SUB = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.out_proj", "mlp.fc1", "mlp.fc2"]


def clip_hf(prefix, layers, d, projection=False, position_ids=False, vocab=64):
    """HF CLIPTextModel[WithProjection] under `prefix` (ending in "text_model." for the body);
    `vocab` tokens (CLIP's real vocabulary is 49408)."""
    root = prefix[:-len("text_model.")]
    out = [(f"{prefix}embeddings.token_embedding.weight", (vocab, d)),
           (f"{prefix}embeddings.position_embedding.weight", (77, d))]
    if position_ids:
        out.append((f"{prefix}embeddings.position_ids", (1, 77), "I64"))
    for l in range(layers):
        p = f"{prefix}encoder.layers.{l}."
        for s in CLIP_SUB[:4]:
            out += [(p + s + ".weight", (d, d)), (p + s + ".bias", (d,))]
        out += [(p + "mlp.fc1.weight", (4 * d, d)), (p + "mlp.fc1.bias", (4 * d,)),
                (p + "mlp.fc2.weight", (d, 4 * d)), (p + "mlp.fc2.bias", (d,))]
        for n in ("layer_norm1", "layer_norm2"):
            out += [(p + n + ".weight", (d,)), (p + n + ".bias", (d,))]
    out += [(f"{prefix}final_layer_norm.weight", (d,)), (f"{prefix}final_layer_norm.bias", (d,))]
    if projection:
        out.append((f"{root}text_projection.weight", (d, d)))
    return out


def open_clip(prefix, layers, d):
    """OpenCLIP text tower (SD2's ViT-H, SDXL's bigG) under `prefix`."""
    out = [(f"{prefix}positional_embedding", (77, d)), (f"{prefix}text_projection", (d, d)),
           (f"{prefix}token_embedding.weight", (64, d)), (f"{prefix}logit_scale", ())]
    for l in range(layers):
        p = f"{prefix}transformer.resblocks.{l}."
        out += [(p + "attn.in_proj_weight", (3 * d, d)), (p + "attn.in_proj_bias", (3 * d,)),
                (p + "attn.out_proj.weight", (d, d)), (p + "attn.out_proj.bias", (d,)),
                (p + "ln_1.weight", (d,)), (p + "ln_1.bias", (d,)),
                (p + "mlp.c_fc.weight", (4 * d, d)), (p + "mlp.c_fc.bias", (4 * d,)),
                (p + "mlp.c_proj.weight", (d, 4 * d)), (p + "mlp.c_proj.bias", (d,)),
                (p + "ln_2.weight", (d,)), (p + "ln_2.bias", (d,))]
    out += [(f"{prefix}ln_final.weight", (d,)), (f"{prefix}ln_final.bias", (d,))]
    return out


def t5_encoder(prefix, blocks, d):
    """HF T5EncoderModel (T5-XXL layout: gated FF wi_0/wi_1)."""
    out = [(f"{prefix}shared.weight", (32, d))]
    for b in range(blocks):
        p = f"{prefix}encoder.block.{b}.layer."
        for s in ("q", "k", "v", "o"):
            out.append((f"{p}0.SelfAttention.{s}.weight", (d, d)))
        if b == 0:
            out.append((f"{p}0.SelfAttention.relative_attention_bias.weight", (32, 4)))
        out += [(f"{p}0.layer_norm.weight", (d,)), (f"{p}1.DenseReluDense.wi_0.weight", (2 * d, d)),
                (f"{p}1.DenseReluDense.wi_1.weight", (2 * d, d)), (f"{p}1.DenseReluDense.wo.weight", (d, 2 * d)),
                (f"{p}1.layer_norm.weight", (d,))]
    out.append((f"{prefix}encoder.final_layer_norm.weight", (d,)))
    return out


def vae(prefix, z=4, ch=8, mult=(1, 2, 4, 4), nres=2):
    """ldm AutoencoderKL (first_stage_model)."""
    out = []

    def resblock(p, cin, cout):
        out.extend([(p + "norm1.weight", (cin,)), (p + "norm1.bias", (cin,)), (p + "conv1.weight", (cout, cin, 3, 3)),
                    (p + "conv1.bias", (cout,)), (p + "norm2.weight", (cout,)), (p + "norm2.bias", (cout,)),
                    (p + "conv2.weight", (cout, cout, 3, 3)), (p + "conv2.bias", (cout,))])
        if cin != cout:
            out.extend([(p + "nin_shortcut.weight", (cout, cin, 1, 1)), (p + "nin_shortcut.bias", (cout,))])

    def mid(p, c):
        resblock(p + "mid.block_1.", c, c)
        for n in ("norm",):
            out.extend([(p + f"mid.attn_1.{n}.weight", (c,)), (p + f"mid.attn_1.{n}.bias", (c,))])
        for n in ("q", "k", "v", "proj_out"):
            out.extend([(p + f"mid.attn_1.{n}.weight", (c, c, 1, 1)), (p + f"mid.attn_1.{n}.bias", (c,))])
        resblock(p + "mid.block_2.", c, c)

    e = prefix + "encoder."
    out.extend([(e + "conv_in.weight", (ch, 3, 3, 3)), (e + "conv_in.bias", (ch,))])
    c = ch
    for i, m in enumerate(mult):
        for j in range(nres):
            resblock(f"{e}down.{i}.block.{j}.", c, ch * m)
            c = ch * m
        if i != len(mult) - 1:
            out.extend([(f"{e}down.{i}.downsample.conv.weight", (c, c, 3, 3)), (f"{e}down.{i}.downsample.conv.bias", (c,))])
    mid(e, c)
    out.extend([(e + "norm_out.weight", (c,)), (e + "norm_out.bias", (c,)), (e + "conv_out.weight", (2 * z, c, 3, 3)),
                (e + "conv_out.bias", (2 * z,))])
    d = prefix + "decoder."
    c = ch * mult[-1]
    out.extend([(d + "conv_in.weight", (c, z, 3, 3)), (d + "conv_in.bias", (c,))])
    mid(d, c)
    for i in reversed(range(len(mult))):
        for j in range(nres + 1):
            resblock(f"{d}up.{i}.block.{j}.", c, ch * mult[i])
            c = ch * mult[i]
        if i != 0:
            out.extend([(f"{d}up.{i}.upsample.conv.weight", (c, c, 3, 3)), (f"{d}up.{i}.upsample.conv.bias", (c,))])
    out.extend([(d + "norm_out.weight", (c,)), (d + "norm_out.bias", (c,)), (d + "conv_out.weight", (3, c, 3, 3)),
                (d + "conv_out.bias", (3,))])
    out.extend([(prefix + "quant_conv.weight", (2 * z, 2 * z, 1, 1)), (prefix + "quant_conv.bias", (2 * z,)),
                (prefix + "post_quant_conv.weight", (z, z, 1, 1)), (prefix + "post_quant_conv.bias", (z,))])
    return out


def mmdit(blocks, hidden, ctx=16, pooled=24, patch=2, channels=16):
    """SD3 MMDiT (ComfyUI comfy/ldm/modules/diffusionmodules/mmdit.py names): the last
    joint block's context_block is pre_only (no attn.proj, no mlp, adaLN with 2 chunks)."""
    h = hidden
    out = [("pos_embed", (1, 64, h)), ("x_embedder.proj.weight", (h, channels, patch, patch)), ("x_embedder.proj.bias", (h,)),
           ("t_embedder.mlp.0.weight", (h, 256)), ("t_embedder.mlp.0.bias", (h,)),
           ("t_embedder.mlp.2.weight", (h, h)), ("t_embedder.mlp.2.bias", (h,)),
           ("y_embedder.mlp.0.weight", (h, pooled)), ("y_embedder.mlp.0.bias", (h,)),
           ("y_embedder.mlp.2.weight", (h, h)), ("y_embedder.mlp.2.bias", (h,)),
           ("context_embedder.weight", (h, ctx)), ("context_embedder.bias", (h,))]
    for i in range(blocks):
        for blk in ("context_block", "x_block"):
            pre_only = blk == "context_block" and i == blocks - 1
            p = f"joint_blocks.{i}.{blk}."
            out += [(p + "adaLN_modulation.1.weight", ((2 if pre_only else 6) * h, h)),
                    (p + "adaLN_modulation.1.bias", ((2 if pre_only else 6) * h,)),
                    (p + "attn.qkv.weight", (3 * h, h)), (p + "attn.qkv.bias", (3 * h,))]
            if not pre_only:
                out += [(p + "attn.proj.weight", (h, h)), (p + "attn.proj.bias", (h,)),
                        (p + "mlp.fc1.weight", (4 * h, h)), (p + "mlp.fc1.bias", (4 * h,)),
                        (p + "mlp.fc2.weight", (h, 4 * h)), (p + "mlp.fc2.bias", (h,))]
    out += [("final_layer.adaLN_modulation.1.weight", (2 * h, h)), ("final_layer.adaLN_modulation.1.bias", (2 * h,)),
            ("final_layer.linear.weight", (patch * patch * channels, h)), ("final_layer.linear.bias", (patch * patch * channels,))]
    return out


def flux(double, single, hidden, guidance=True, ctx=16, vec=12, channels=64):
    """Flux (black-forest-labs flux model.py names)."""
    h = hidden
    out = [("img_in.weight", (h, channels)), ("img_in.bias", (h,))]
    for n, din in (("time_in", 256), ("vector_in", vec)) + ((("guidance_in", 256),) if guidance else ()):
        out += [(f"{n}.in_layer.weight", (h, din)), (f"{n}.in_layer.bias", (h,)),
                (f"{n}.out_layer.weight", (h, h)), (f"{n}.out_layer.bias", (h,))]
    out += [("txt_in.weight", (h, ctx)), ("txt_in.bias", (h,))]
    for i in range(double):
        p = f"double_blocks.{i}."
        for s in ("img", "txt"):
            out += [(f"{p}{s}_mod.lin.weight", (6 * h, h)), (f"{p}{s}_mod.lin.bias", (6 * h,)),
                    (f"{p}{s}_attn.qkv.weight", (3 * h, h)), (f"{p}{s}_attn.qkv.bias", (3 * h,)),
                    (f"{p}{s}_attn.norm.query_norm.scale", (h // 2,)), (f"{p}{s}_attn.norm.key_norm.scale", (h // 2,)),
                    (f"{p}{s}_attn.proj.weight", (h, h)), (f"{p}{s}_attn.proj.bias", (h,)),
                    (f"{p}{s}_mlp.0.weight", (4 * h, h)), (f"{p}{s}_mlp.0.bias", (4 * h,)),
                    (f"{p}{s}_mlp.2.weight", (h, 4 * h)), (f"{p}{s}_mlp.2.bias", (h,))]
    for i in range(single):
        p = f"single_blocks.{i}."
        out += [(p + "linear1.weight", (7 * h, h)), (p + "linear1.bias", (7 * h,)),
                (p + "linear2.weight", (h, 5 * h)), (p + "linear2.bias", (h,)),
                (p + "norm.query_norm.scale", (h // 2,)), (p + "norm.key_norm.scale", (h // 2,)),
                (p + "modulation.lin.weight", (3 * h, h)), (p + "modulation.lin.bias", (3 * h,))]
    out += [("final_layer.linear.weight", (channels, h)), ("final_layer.linear.bias", (channels,)),
            ("final_layer.adaLN_modulation.1.weight", (2 * h, h)), ("final_layer.adaLN_modulation.1.bias", (2 * h,))]
    return out


def wan(blocks, dim, i2v=False, text=16, ffn=48, channels=16):
    """Wan 2.1 DiT (wan/modules/model.py WanModel names)."""
    d = dim
    out = [("patch_embedding.weight", (d, channels, 1, 2, 2)), ("patch_embedding.bias", (d,)),
           ("text_embedding.0.weight", (d, text)), ("text_embedding.0.bias", (d,)),
           ("text_embedding.2.weight", (d, d)), ("text_embedding.2.bias", (d,)),
           ("time_embedding.0.weight", (d, 256)), ("time_embedding.0.bias", (d,)),
           ("time_embedding.2.weight", (d, d)), ("time_embedding.2.bias", (d,)),
           ("time_projection.1.weight", (6 * d, d)), ("time_projection.1.bias", (6 * d,))]
    for i in range(blocks):
        p = f"blocks.{i}."
        out.append((p + "modulation", (1, 6, d)))
        for a in ("self_attn", "cross_attn"):
            for s in ("q", "k", "v", "o"):
                out += [(f"{p}{a}.{s}.weight", (d, d)), (f"{p}{a}.{s}.bias", (d,))]
            out += [(f"{p}{a}.norm_q.weight", (d,)), (f"{p}{a}.norm_k.weight", (d,))]
        if i2v:
            out += [(p + "cross_attn.k_img.weight", (d, d)), (p + "cross_attn.k_img.bias", (d,)),
                    (p + "cross_attn.v_img.weight", (d, d)), (p + "cross_attn.v_img.bias", (d,)),
                    (p + "cross_attn.norm_k_img.weight", (d,))]
        out += [(p + "norm3.weight", (d,)), (p + "norm3.bias", (d,)),
                (p + "ffn.0.weight", (ffn, d)), (p + "ffn.0.bias", (ffn,)),
                (p + "ffn.2.weight", (d, ffn)), (p + "ffn.2.bias", (d,))]
    out += [("head.modulation", (1, 2, d)), ("head.head.weight", (4 * channels, d)), ("head.head.bias", (4 * channels,))]
    if i2v:
        out += [("img_emb.proj.0.weight", (20,)), ("img_emb.proj.0.bias", (20,)),
                ("img_emb.proj.1.weight", (20, 20)), ("img_emb.proj.1.bias", (20,)),
                ("img_emb.proj.3.weight", (d, 20)), ("img_emb.proj.3.bias", (d,)),
                ("img_emb.proj.4.weight", (d,)), ("img_emb.proj.4.bias", (d,))]
    return out


def qwen_image(blocks, dim, text=24, channels=64):
    """Qwen-Image (diffusers QwenImageTransformer2DModel names, which ComfyUI keeps)."""
    d = dim
    out = [("img_in.weight", (d, channels)), ("img_in.bias", (d,)), ("txt_norm.weight", (text,)),
           ("txt_in.weight", (d, text)), ("txt_in.bias", (d,)),
           ("time_text_embed.timestep_embedder.linear_1.weight", (d, 256)),
           ("time_text_embed.timestep_embedder.linear_1.bias", (d,)),
           ("time_text_embed.timestep_embedder.linear_2.weight", (d, d)),
           ("time_text_embed.timestep_embedder.linear_2.bias", (d,))]
    for i in range(blocks):
        p = f"transformer_blocks.{i}."
        for s in ("img", "txt"):
            out += [(f"{p}{s}_mod.1.weight", (6 * d, d)), (f"{p}{s}_mod.1.bias", (6 * d,))]
        for s in ("to_q", "to_k", "to_v", "add_q_proj", "add_k_proj", "add_v_proj"):
            out += [(f"{p}attn.{s}.weight", (d, d)), (f"{p}attn.{s}.bias", (d,))]
        for s in ("norm_q", "norm_k", "norm_added_q", "norm_added_k"):
            out.append((f"{p}attn.{s}.weight", (d // 2,)))
        out += [(f"{p}attn.to_out.0.weight", (d, d)), (f"{p}attn.to_out.0.bias", (d,)),
                (f"{p}attn.to_add_out.weight", (d, d)), (f"{p}attn.to_add_out.bias", (d,))]
        for s in ("img", "txt"):
            out += [(f"{p}{s}_mlp.net.0.proj.weight", (4 * d, d)), (f"{p}{s}_mlp.net.0.proj.bias", (4 * d,)),
                    (f"{p}{s}_mlp.net.2.weight", (d, 4 * d)), (f"{p}{s}_mlp.net.2.bias", (d,))]
    out += [("norm_out.linear.weight", (2 * d, d)), ("norm_out.linear.bias", (2 * d,)),
            ("proj_out.weight", (channels, d)), ("proj_out.bias", (channels,))]
    return out


# Wan original -> diffusers names (diffusers scripts/convert_wan_to_diffusers.py
# TRANSFORMER_KEYS_RENAME_DICT: norm2 and norm3 swap, ffn.0 -> ffn.net.0.proj, ...).
WAN_RENAMES = [("time_embedding.0", "condition_embedder.time_embedder.linear_1"),
               ("time_embedding.2", "condition_embedder.time_embedder.linear_2"),
               ("text_embedding.0", "condition_embedder.text_embedder.linear_1"),
               ("text_embedding.2", "condition_embedder.text_embedder.linear_2"),
               ("time_projection.1", "condition_embedder.time_proj"),
               ("head.modulation", "scale_shift_table"), ("head.head", "proj_out"),
               ("modulation", "scale_shift_table"), ("ffn.0", "ffn.net.0.proj"), ("ffn.2", "ffn.net.2"),
               ("norm3", "norm2"),
               ("img_emb.proj.0", "condition_embedder.image_embedder.norm1"),
               ("img_emb.proj.1", "condition_embedder.image_embedder.ff.net.0.proj"),
               ("img_emb.proj.3", "condition_embedder.image_embedder.ff.net.2"),
               ("img_emb.proj.4", "condition_embedder.image_embedder.norm2"),
               ("self_attn.q", "attn1.to_q"), ("self_attn.k", "attn1.to_k"), ("self_attn.v", "attn1.to_v"),
               ("self_attn.o", "attn1.to_out.0"), ("self_attn.norm_q", "attn1.norm_q"), ("self_attn.norm_k", "attn1.norm_k"),
               ("cross_attn.q", "attn2.to_q"), ("cross_attn.k_img", "attn2.add_k_proj"),
               ("cross_attn.v_img", "attn2.add_v_proj"), ("cross_attn.norm_k_img", "attn2.norm_added_k"),
               ("cross_attn.k", "attn2.to_k"), ("cross_attn.v", "attn2.to_v"), ("cross_attn.o", "attn2.to_out.0"),
               ("cross_attn.norm_q", "attn2.norm_q"), ("cross_attn.norm_k", "attn2.norm_k")]


def wan_to_diffusers(name):
    """One Wan original key -> its diffusers name (longest matching module path wins)."""
    body = name
    for suffix in (".weight", ".bias"):
        if name.endswith(suffix):
            body = name[:-len(suffix)]
            break
    suffix = name[len(body):]
    parts = body.split(".")
    if parts[0] == "blocks":
        head, rest = ".".join(parts[:2]), ".".join(parts[2:])
    else:
        head, rest = "", body
    for o, d in WAN_RENAMES:
        if rest == o:
            rest = d
            break
    return (head + "." if head else "") + rest + suffix
