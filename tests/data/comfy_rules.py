"""ComfyUI's LoRA loading rules, transcribed to plain Python for the test-data generator, so
the expected "lora key not loaded" / "NOT LOADED" / applied sets of every (base, LoRA) pair
come from ComfyUI's own algorithm, not from genscope.

Source: Comfy-Org/ComfyUI, comfy/lora.py @ 17358c8f73b581a0d22facc3c385822f09b8bfb1
(model_lora_keys_unet, model_lora_keys_clip, load_lora), comfy/utils.py @
09708eae709a992a5684bed3595ce4d07e705b4e (unet_to_diffusers, mmdit_to_diffusers,
flux_to_diffusers), comfy/weight_adapter/*.py (adapter .load), comfy/sd.py
(load_lora_for_models: NOT LOADED). The model's state-dict keys (`sdk`) are given by the
generator, which builds each model from its structure.

Python sets in ComfyUI (UNET_MAP_ATTENTIONS, TRANSFORMER_BLOCKS, UNET_MAP_BASIC,
MMDIT_MAP_*) iterate in hash order there; lists in the listed order here. Only a LoRA naming
the same weight twice through those sets could tell the difference.
"""

UNET_MAP_ATTENTIONS = ["proj_in.weight", "proj_in.bias", "proj_out.weight", "proj_out.bias", "norm.weight", "norm.bias"]
TRANSFORMER_BLOCKS = ["norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias",
                      "attn1.to_q.weight", "attn1.to_k.weight", "attn1.to_v.weight", "attn1.to_out.0.weight",
                      "attn1.to_out.0.bias", "attn2.to_q.weight", "attn2.to_k.weight", "attn2.to_v.weight",
                      "attn2.to_out.0.weight", "attn2.to_out.0.bias", "ff.net.0.proj.weight", "ff.net.0.proj.bias",
                      "ff.net.2.weight", "ff.net.2.bias"]
UNET_MAP_RESNET = {"in_layers.2.weight": "conv1.weight", "in_layers.2.bias": "conv1.bias",
                   "emb_layers.1.weight": "time_emb_proj.weight", "emb_layers.1.bias": "time_emb_proj.bias",
                   "out_layers.3.weight": "conv2.weight", "out_layers.3.bias": "conv2.bias",
                   "skip_connection.weight": "conv_shortcut.weight", "skip_connection.bias": "conv_shortcut.bias",
                   "in_layers.0.weight": "norm1.weight", "in_layers.0.bias": "norm1.bias",
                   "out_layers.0.weight": "norm2.weight", "out_layers.0.bias": "norm2.bias"}
UNET_MAP_BASIC = [("label_emb.0.0.weight", "class_embedding.linear_1.weight"),
                  ("label_emb.0.0.bias", "class_embedding.linear_1.bias"),
                  ("label_emb.0.2.weight", "class_embedding.linear_2.weight"),
                  ("label_emb.0.2.bias", "class_embedding.linear_2.bias"),
                  ("label_emb.0.0.weight", "add_embedding.linear_1.weight"),
                  ("label_emb.0.0.bias", "add_embedding.linear_1.bias"),
                  ("label_emb.0.2.weight", "add_embedding.linear_2.weight"),
                  ("label_emb.0.2.bias", "add_embedding.linear_2.bias"),
                  ("input_blocks.0.0.weight", "conv_in.weight"), ("input_blocks.0.0.bias", "conv_in.bias"),
                  ("out.0.weight", "conv_norm_out.weight"), ("out.0.bias", "conv_norm_out.bias"),
                  ("out.2.weight", "conv_out.weight"), ("out.2.bias", "conv_out.bias"),
                  ("time_embed.0.weight", "time_embedding.linear_1.weight"),
                  ("time_embed.0.bias", "time_embedding.linear_1.bias"),
                  ("time_embed.2.weight", "time_embedding.linear_2.weight"),
                  ("time_embed.2.bias", "time_embedding.linear_2.bias")]


def unet_to_diffusers(unet_config):
    num_res_blocks = unet_config["num_res_blocks"]
    channel_mult = unet_config["channel_mult"]
    transformer_depth = unet_config["transformer_depth"][:]
    transformer_depth_output = unet_config["transformer_depth_output"][:]
    num_blocks = len(channel_mult)
    transformers_mid = unet_config.get("transformer_depth_middle", None)
    m = {}
    for x in range(num_blocks):
        n = 1 + (num_res_blocks[x] + 1) * x
        for i in range(num_res_blocks[x]):
            for b in UNET_MAP_RESNET:
                m["down_blocks.{}.resnets.{}.{}".format(x, i, UNET_MAP_RESNET[b])] = "input_blocks.{}.0.{}".format(n, b)
            num_transformers = transformer_depth.pop(0)
            if num_transformers > 0:
                for b in UNET_MAP_ATTENTIONS:
                    m["down_blocks.{}.attentions.{}.{}".format(x, i, b)] = "input_blocks.{}.1.{}".format(n, b)
                for t in range(num_transformers):
                    for b in TRANSFORMER_BLOCKS:
                        m["down_blocks.{}.attentions.{}.transformer_blocks.{}.{}".format(x, i, t, b)] = \
                            "input_blocks.{}.1.transformer_blocks.{}.{}".format(n, t, b)
            n += 1
        for k in ["weight", "bias"]:
            m["down_blocks.{}.downsamplers.0.conv.{}".format(x, k)] = "input_blocks.{}.0.op.{}".format(n, k)
    i = 0
    for b in UNET_MAP_ATTENTIONS:
        m["mid_block.attentions.{}.{}".format(i, b)] = "middle_block.1.{}".format(b)
    for t in range(transformers_mid):
        for b in TRANSFORMER_BLOCKS:
            m["mid_block.attentions.{}.transformer_blocks.{}.{}".format(i, t, b)] = "middle_block.1.transformer_blocks.{}.{}".format(t, b)
    for i, n in enumerate([0, 2]):
        for b in UNET_MAP_RESNET:
            m["mid_block.resnets.{}.{}".format(i, UNET_MAP_RESNET[b])] = "middle_block.{}.{}".format(n, b)
    num_res_blocks = list(reversed(num_res_blocks))
    for x in range(num_blocks):
        n = (num_res_blocks[x] + 1) * x
        l = num_res_blocks[x] + 1
        for i in range(l):
            c = 0
            for b in UNET_MAP_RESNET:
                m["up_blocks.{}.resnets.{}.{}".format(x, i, UNET_MAP_RESNET[b])] = "output_blocks.{}.0.{}".format(n, b)
            c += 1
            num_transformers = transformer_depth_output.pop()
            if num_transformers > 0:
                c += 1
                for b in UNET_MAP_ATTENTIONS:
                    m["up_blocks.{}.attentions.{}.{}".format(x, i, b)] = "output_blocks.{}.1.{}".format(n, b)
                for t in range(num_transformers):
                    for b in TRANSFORMER_BLOCKS:
                        m["up_blocks.{}.attentions.{}.transformer_blocks.{}.{}".format(x, i, t, b)] = \
                            "output_blocks.{}.1.transformer_blocks.{}.{}".format(n, t, b)
            if i == l - 1:
                for k in ["weight", "bias"]:
                    m["up_blocks.{}.upsamplers.0.conv.{}".format(x, k)] = "output_blocks.{}.{}.conv.{}".format(n, c, k)
            n += 1
    for k in UNET_MAP_BASIC:
        m[k[1]] = k[0]
    return m


SWAP = "swap_scale_shift"

MMDIT_MAP_BASIC = [("context_embedder.bias", "context_embedder.bias"),
                   ("context_embedder.weight", "context_embedder.weight"),
                   ("t_embedder.mlp.0.bias", "time_text_embed.timestep_embedder.linear_1.bias"),
                   ("t_embedder.mlp.0.weight", "time_text_embed.timestep_embedder.linear_1.weight"),
                   ("t_embedder.mlp.2.bias", "time_text_embed.timestep_embedder.linear_2.bias"),
                   ("t_embedder.mlp.2.weight", "time_text_embed.timestep_embedder.linear_2.weight"),
                   ("x_embedder.proj.bias", "pos_embed.proj.bias"),
                   ("x_embedder.proj.weight", "pos_embed.proj.weight"),
                   ("y_embedder.mlp.0.bias", "time_text_embed.text_embedder.linear_1.bias"),
                   ("y_embedder.mlp.0.weight", "time_text_embed.text_embedder.linear_1.weight"),
                   ("y_embedder.mlp.2.bias", "time_text_embed.text_embedder.linear_2.bias"),
                   ("y_embedder.mlp.2.weight", "time_text_embed.text_embedder.linear_2.weight"),
                   ("pos_embed", "pos_embed.pos_embed"),
                   ("final_layer.adaLN_modulation.1.bias", "norm_out.linear.bias", SWAP),
                   ("final_layer.adaLN_modulation.1.weight", "norm_out.linear.weight", SWAP),
                   ("final_layer.linear.bias", "proj_out.bias"),
                   ("final_layer.linear.weight", "proj_out.weight")]
MMDIT_MAP_BLOCK = [("context_block.adaLN_modulation.1.bias", "norm1_context.linear.bias"),
                   ("context_block.adaLN_modulation.1.weight", "norm1_context.linear.weight"),
                   ("context_block.attn.proj.bias", "attn.to_add_out.bias"),
                   ("context_block.attn.proj.weight", "attn.to_add_out.weight"),
                   ("context_block.mlp.fc1.bias", "ff_context.net.0.proj.bias"),
                   ("context_block.mlp.fc1.weight", "ff_context.net.0.proj.weight"),
                   ("context_block.mlp.fc2.bias", "ff_context.net.2.bias"),
                   ("context_block.mlp.fc2.weight", "ff_context.net.2.weight"),
                   ("context_block.attn.ln_q.weight", "attn.norm_added_q.weight"),
                   ("context_block.attn.ln_k.weight", "attn.norm_added_k.weight"),
                   ("x_block.adaLN_modulation.1.bias", "norm1.linear.bias"),
                   ("x_block.adaLN_modulation.1.weight", "norm1.linear.weight"),
                   ("x_block.attn.proj.bias", "attn.to_out.0.bias"),
                   ("x_block.attn.proj.weight", "attn.to_out.0.weight"),
                   ("x_block.attn.ln_q.weight", "attn.norm_q.weight"),
                   ("x_block.attn.ln_k.weight", "attn.norm_k.weight"),
                   ("x_block.attn2.proj.bias", "attn2.to_out.0.bias"),
                   ("x_block.attn2.proj.weight", "attn2.to_out.0.weight"),
                   ("x_block.attn2.ln_q.weight", "attn2.norm_q.weight"),
                   ("x_block.attn2.ln_k.weight", "attn2.norm_k.weight"),
                   ("x_block.mlp.fc1.bias", "ff.net.0.proj.bias"),
                   ("x_block.mlp.fc1.weight", "ff.net.0.proj.weight"),
                   ("x_block.mlp.fc2.bias", "ff.net.2.bias"),
                   ("x_block.mlp.fc2.weight", "ff.net.2.weight")]


def mmdit_to_diffusers(mmdit_config, output_prefix=""):
    key_map = {}
    depth = mmdit_config.get("depth", 0)
    num_blocks = mmdit_config.get("num_blocks", depth)
    for i in range(num_blocks):
        block_from = "transformer_blocks.{}".format(i)
        block_to = "{}joint_blocks.{}".format(output_prefix, i)
        offset = depth * 64
        for end in ("weight", "bias"):
            k = "{}.attn.".format(block_from)
            qkv = "{}.x_block.attn.qkv.{}".format(block_to, end)
            key_map["{}to_q.{}".format(k, end)] = (qkv, (0, 0, offset))
            key_map["{}to_k.{}".format(k, end)] = (qkv, (0, offset, offset))
            key_map["{}to_v.{}".format(k, end)] = (qkv, (0, offset * 2, offset))
            qkv = "{}.context_block.attn.qkv.{}".format(block_to, end)
            key_map["{}add_q_proj.{}".format(k, end)] = (qkv, (0, 0, offset))
            key_map["{}add_k_proj.{}".format(k, end)] = (qkv, (0, offset, offset))
            key_map["{}add_v_proj.{}".format(k, end)] = (qkv, (0, offset * 2, offset))
            k = "{}.attn2.".format(block_from)
            qkv = "{}.x_block.attn2.qkv.{}".format(block_to, end)
            key_map["{}to_q.{}".format(k, end)] = (qkv, (0, 0, offset))
            key_map["{}to_k.{}".format(k, end)] = (qkv, (0, offset, offset))
            key_map["{}to_v.{}".format(k, end)] = (qkv, (0, offset * 2, offset))
        for k in MMDIT_MAP_BLOCK:
            key_map["{}.{}".format(block_from, k[1])] = "{}.{}".format(block_to, k[0])
    map_basic = list(MMDIT_MAP_BASIC)
    map_basic.append(("joint_blocks.{}.context_block.adaLN_modulation.1.bias".format(depth - 1),
                      "transformer_blocks.{}.norm1_context.linear.bias".format(depth - 1), SWAP))
    map_basic.append(("joint_blocks.{}.context_block.adaLN_modulation.1.weight".format(depth - 1),
                      "transformer_blocks.{}.norm1_context.linear.weight".format(depth - 1), SWAP))
    for k in map_basic:
        if len(k) > 2:
            key_map[k[1]] = ("{}{}".format(output_prefix, k[0]), None, k[2])
        else:
            key_map[k[1]] = "{}{}".format(output_prefix, k[0])
    return key_map


FLUX_DOUBLE = {"attn.to_out.0.weight": "img_attn.proj.weight", "attn.to_out.0.bias": "img_attn.proj.bias",
               "norm1.linear.weight": "img_mod.lin.weight", "norm1.linear.bias": "img_mod.lin.bias",
               "norm1_context.linear.weight": "txt_mod.lin.weight", "norm1_context.linear.bias": "txt_mod.lin.bias",
               "attn.to_add_out.weight": "txt_attn.proj.weight", "attn.to_add_out.bias": "txt_attn.proj.bias",
               "ff.net.0.proj.weight": "img_mlp.0.weight", "ff.net.0.proj.bias": "img_mlp.0.bias",
               "ff.net.2.weight": "img_mlp.2.weight", "ff.net.2.bias": "img_mlp.2.bias",
               "ff_context.net.0.proj.weight": "txt_mlp.0.weight", "ff_context.net.0.proj.bias": "txt_mlp.0.bias",
               "ff_context.net.2.weight": "txt_mlp.2.weight", "ff_context.net.2.bias": "txt_mlp.2.bias",
               "ff.linear_in.weight": "img_mlp.0.weight", "ff.linear_in.bias": "img_mlp.0.bias",
               "ff.linear_out.weight": "img_mlp.2.weight", "ff.linear_out.bias": "img_mlp.2.bias",
               "ff_context.linear_in.weight": "txt_mlp.0.weight", "ff_context.linear_in.bias": "txt_mlp.0.bias",
               "ff_context.linear_out.weight": "txt_mlp.2.weight", "ff_context.linear_out.bias": "txt_mlp.2.bias",
               "attn.norm_q.weight": "img_attn.norm.query_norm.weight", "attn.norm_k.weight": "img_attn.norm.key_norm.weight",
               "attn.norm_added_q.weight": "txt_attn.norm.query_norm.weight",
               "attn.norm_added_k.weight": "txt_attn.norm.key_norm.weight"}
FLUX_SINGLE = {"norm.linear.weight": "modulation.lin.weight", "norm.linear.bias": "modulation.lin.bias",
               "proj_out.weight": "linear2.weight", "proj_out.bias": "linear2.bias",
               "attn.norm_q.weight": "norm.query_norm.weight", "attn.norm_k.weight": "norm.key_norm.weight",
               "attn.to_qkv_mlp_proj.weight": "linear1.weight", "attn.to_out.weight": "linear2.weight"}
FLUX_BASIC = [("final_layer.linear.bias", "proj_out.bias"), ("final_layer.linear.weight", "proj_out.weight"),
              ("img_in.bias", "x_embedder.bias"), ("img_in.weight", "x_embedder.weight"),
              ("time_in.in_layer.bias", "time_text_embed.timestep_embedder.linear_1.bias"),
              ("time_in.in_layer.weight", "time_text_embed.timestep_embedder.linear_1.weight"),
              ("time_in.out_layer.bias", "time_text_embed.timestep_embedder.linear_2.bias"),
              ("time_in.out_layer.weight", "time_text_embed.timestep_embedder.linear_2.weight"),
              ("txt_in.bias", "context_embedder.bias"), ("txt_in.weight", "context_embedder.weight"),
              ("vector_in.in_layer.bias", "time_text_embed.text_embedder.linear_1.bias"),
              ("vector_in.in_layer.weight", "time_text_embed.text_embedder.linear_1.weight"),
              ("vector_in.out_layer.bias", "time_text_embed.text_embedder.linear_2.bias"),
              ("vector_in.out_layer.weight", "time_text_embed.text_embedder.linear_2.weight"),
              ("guidance_in.in_layer.bias", "time_text_embed.guidance_embedder.linear_1.bias"),
              ("guidance_in.in_layer.weight", "time_text_embed.guidance_embedder.linear_1.weight"),
              ("guidance_in.out_layer.bias", "time_text_embed.guidance_embedder.linear_2.bias"),
              ("guidance_in.out_layer.weight", "time_text_embed.guidance_embedder.linear_2.weight"),
              ("final_layer.adaLN_modulation.1.bias", "norm_out.linear.bias", SWAP),
              ("final_layer.adaLN_modulation.1.weight", "norm_out.linear.weight", SWAP),
              ("pos_embed_input.bias", "controlnet_x_embedder.bias"),
              ("pos_embed_input.weight", "controlnet_x_embedder.weight")]


def flux_to_diffusers(mmdit_config, output_prefix=""):
    n_double_layers = mmdit_config.get("depth", 0)
    n_single_layers = mmdit_config.get("depth_single_blocks", 0)
    hidden_size = mmdit_config.get("hidden_size", 0)
    key_map = {}
    for index in range(n_double_layers):
        prefix_from = "transformer_blocks.{}".format(index)
        prefix_to = "{}double_blocks.{}".format(output_prefix, index)
        for end in ("weight", "bias"):
            k = "{}.attn.".format(prefix_from)
            qkv = "{}.img_attn.qkv.{}".format(prefix_to, end)
            key_map["{}to_q.{}".format(k, end)] = (qkv, (0, 0, hidden_size))
            key_map["{}to_k.{}".format(k, end)] = (qkv, (0, hidden_size, hidden_size))
            key_map["{}to_v.{}".format(k, end)] = (qkv, (0, hidden_size * 2, hidden_size))
            qkv = "{}.txt_attn.qkv.{}".format(prefix_to, end)
            key_map["{}add_q_proj.{}".format(k, end)] = (qkv, (0, 0, hidden_size))
            key_map["{}add_k_proj.{}".format(k, end)] = (qkv, (0, hidden_size, hidden_size))
            key_map["{}add_v_proj.{}".format(k, end)] = (qkv, (0, hidden_size * 2, hidden_size))
        for k in FLUX_DOUBLE:
            key_map["{}.{}".format(prefix_from, k)] = "{}.{}".format(prefix_to, FLUX_DOUBLE[k])
    for index in range(n_single_layers):
        prefix_from = "single_transformer_blocks.{}".format(index)
        prefix_to = "{}single_blocks.{}".format(output_prefix, index)
        for end in ("weight", "bias"):
            k = "{}.attn.".format(prefix_from)
            qkv = "{}.linear1.{}".format(prefix_to, end)
            key_map["{}to_q.{}".format(k, end)] = (qkv, (0, 0, hidden_size))
            key_map["{}to_k.{}".format(k, end)] = (qkv, (0, hidden_size, hidden_size))
            key_map["{}to_v.{}".format(k, end)] = (qkv, (0, hidden_size * 2, hidden_size))
            key_map["{}.proj_mlp.{}".format(prefix_from, end)] = (qkv, (0, hidden_size * 3, hidden_size * 4))
        for k in FLUX_SINGLE:
            key_map["{}.{}".format(prefix_from, k)] = "{}.{}".format(prefix_to, FLUX_SINGLE[k])
    for k in FLUX_BASIC:
        if len(k) > 2:
            key_map[k[1]] = ("{}{}".format(output_prefix, k[0]), None, k[2])
        else:
            key_map[k[1]] = "{}{}".format(output_prefix, k[0])
    return key_map


LORA_CLIP_MAP = {"mlp.fc1": "mlp_fc1", "mlp.fc2": "mlp_fc2", "self_attn.k_proj": "self_attn_k_proj",
                 "self_attn.q_proj": "self_attn_q_proj", "self_attn.v_proj": "self_attn_v_proj",
                 "self_attn.out_proj": "self_attn_out_proj"}


def model_lora_keys_clip(sdk, key_map):
    prefix_set = set()
    for k in sdk:
        if k.endswith(".weight"):
            key_map["text_encoders.{}".format(k[:-len(".weight")])] = k
            tp = k.find(".transformer.")
            if tp > 0 and not k.startswith("clip_"):
                key_map["text_encoders.{}".format(k[tp + 1:-len(".weight")])] = k
            prefix_set.add(k.split('.')[0])
    text_model_lora_key = "lora_te_text_model_encoder_layers_{}_{}"
    clip_l_present = False
    clip_g_present = False
    for b in range(32):
        for c in LORA_CLIP_MAP:
            k = "clip_h.transformer.text_model.encoder.layers.{}.{}.weight".format(b, c)
            if k in sdk:
                key_map[text_model_lora_key.format(b, LORA_CLIP_MAP[c])] = k
                key_map["lora_te1_text_model_encoder_layers_{}_{}".format(b, LORA_CLIP_MAP[c])] = k
                key_map["text_encoder.text_model.encoder.layers.{}.{}".format(b, c)] = k
            k = "clip_l.transformer.text_model.encoder.layers.{}.{}.weight".format(b, c)
            if k in sdk:
                key_map[text_model_lora_key.format(b, LORA_CLIP_MAP[c])] = k
                key_map["lora_te1_text_model_encoder_layers_{}_{}".format(b, LORA_CLIP_MAP[c])] = k
                clip_l_present = True
                key_map["text_encoder.text_model.encoder.layers.{}.{}".format(b, c)] = k
            k = "clip_g.transformer.text_model.encoder.layers.{}.{}.weight".format(b, c)
            if k in sdk:
                clip_g_present = True
                if clip_l_present:
                    key_map["lora_te2_text_model_encoder_layers_{}_{}".format(b, LORA_CLIP_MAP[c])] = k
                    key_map["text_encoder_2.text_model.encoder.layers.{}.{}".format(b, c)] = k
                else:
                    key_map["lora_te_text_model_encoder_layers_{}_{}".format(b, LORA_CLIP_MAP[c])] = k
                    key_map["text_encoder.text_model.encoder.layers.{}.{}".format(b, c)] = k
                    key_map["lora_prior_te_text_model_encoder_layers_{}_{}".format(b, LORA_CLIP_MAP[c])] = k
    for k in sdk:
        if k.endswith(".weight"):
            if k.startswith("t5xxl.transformer."):
                l_key = k[len("t5xxl.transformer."):-len(".weight")]
                t5_index = 1
                if clip_g_present:
                    t5_index += 1
                if clip_l_present:
                    t5_index += 1
                    if t5_index == 2:
                        key_map["lora_te{}_{}".format(t5_index, l_key.replace(".", "_"))] = k
                        t5_index += 1
                key_map["lora_te{}_{}".format(t5_index, l_key.replace(".", "_"))] = k
    if len(prefix_set) == 1:
        full_prefix = "{}.transformer.model.".format(next(iter(prefix_set)))
        for k in sdk:
            if k.endswith(".weight") and k.startswith(full_prefix):
                key_map["lora_te_{}".format(k[len(full_prefix):-len(".weight")].replace(".", "_"))] = k
    k = "clip_g.transformer.text_projection.weight"
    if k in sdk:
        key_map["lora_prior_te_text_projection"] = k
        key_map["lora_te2_text_projection"] = k
    k = "clip_l.transformer.text_projection.weight"
    if k in sdk:
        key_map["lora_te1_text_projection"] = k
    return key_map


def model_lora_keys_unet(sdk, shapes, family, config, key_map):
    """family: "unet", "sd3", "flux", "qwen", "wan"; config: the family's config dict."""
    for k in sdk:
        if k.startswith("diffusion_model."):
            if k.endswith(".weight"):
                key_lora = k[len("diffusion_model."):-len(".weight")].replace(".", "_")
                key_map["lora_unet_{}".format(key_lora)] = k
                key_map["{}".format(k[:-len(".weight")])] = k
            else:
                key_map["{}".format(k)] = k
    diffusers_keys = unet_to_diffusers(config) if family == "unet" else {}
    for k in diffusers_keys:
        if k.endswith(".weight"):
            unet_key = "diffusion_model.{}".format(diffusers_keys[k])
            key_lora = k[:-len(".weight")].replace(".", "_")
            key_map["lora_unet_{}".format(key_lora)] = unet_key
            key_map["lycoris_{}".format(key_lora)] = unet_key
            for p in ["", "unet."]:
                diffusers_lora_key = "{}{}".format(p, k[:-len(".weight")].replace(".to_", ".processor.to_"))
                if diffusers_lora_key.endswith(".to_out.0"):
                    diffusers_lora_key = diffusers_lora_key[:-2]
                key_map[diffusers_lora_key] = unet_key
    if family == "sd3":
        diffusers_keys = mmdit_to_diffusers(config, output_prefix="diffusion_model.")
        for k in diffusers_keys:
            if k.endswith(".weight"):
                to = diffusers_keys[k]
                key_map["transformer.{}".format(k[:-len(".weight")])] = to
                key_map["base_model.model.{}".format(k[:-len(".weight")])] = to
                key_map["lora_transformer_{}".format(k[:-len(".weight")].replace(".", "_"))] = to
                key_map["lycoris_{}".format(k[:-len(".weight")].replace(".", "_"))] = to
    if family == "flux":
        diffusers_keys = flux_to_diffusers(config, output_prefix="diffusion_model.")
        for k in diffusers_keys:
            if k.endswith(".weight"):
                to = diffusers_keys[k]
                key_map["transformer.{}".format(k[:-len(".weight")])] = to
                key_map["lycoris_{}".format(k[:-len(".weight")].replace(".", "_"))] = to
                key_map["lora_transformer_{}".format(k[:-len(".weight")].replace(".", "_"))] = to
                key_map[k[:-len(".weight")]] = to
        for k in sdk:
            hidden_size = config.get("hidden_size", 0)
            if k.endswith(".weight") and ".linear1." in k:
                key_map["{}".format(k.replace(".linear1.weight", ".linear1_qkv"))] = (k, (0, 0, hidden_size * 3))
    if family == "qwen":
        for k in sdk:
            if k.startswith("diffusion_model.") and k.endswith(".weight"):
                key_lora = k[len("diffusion_model."):-len(".weight")]
                targets = [(key_lora, k)]
                if key_lora.endswith(".img_mlp.gate_up"):
                    half = shapes[k][0] // 2
                    targets = [(key_lora.replace(".gate_up", ".gate_layer"), (k, (0, 0, half))),
                               (key_lora.replace(".gate_up", ".proj"), (k, (0, half, half)))]
                for key_lora, to in targets:
                    key_map["{}".format(key_lora)] = to
                    key_map["transformer.{}".format(key_lora)] = to
                    key_map["lycoris_{}".format(key_lora.replace(".", "_"))] = to
    return key_map


# comfy/weight_adapter/lora.py LoRAAdapter.load: (up name, down name) in the order it tries.
LORA_NAMES = [("{}.lora_up.weight", "{}.lora_down.weight"), ("{}_lora.up.weight", "{}_lora.down.weight"),
              ("{}.lora_B.weight", "{}.lora_A.weight"), ("{}.lora.up.weight", "{}.lora.down.weight"),
              ("{}.lora_B", "{}.lora_A"), ("{}.lora_linear_layer.up.weight", "{}.lora_linear_layer.down.weight"),
              ("{}.lora_B.default.weight", "{}.lora_A.default.weight")]


def load_lora(lora, to_load):
    """lora: the LoRA's keys (a set); returns (patch_dict {target: [writers]}, loaded_keys, error).
    Writers are kept in order so the shadowed modules can be listed; ComfyUI keeps the last.
    `error` is the KeyError ComfyUI raises (the first), or None."""
    patch_dict = {}
    loaded_keys = set()

    def put(target, x):
        patch_dict.setdefault(target, []).append(x)

    # Every key a name x can take starts with x: skip the names no key starts with (the walk
    # below is unchanged for the others, and in the same order).
    prefixes = {k[:i] for k in lora for i in range(1, len(k))}
    for x in to_load:
        if x not in prefixes:
            continue
        try:
            alpha_name = "{}.alpha".format(x)
            if alpha_name in lora:
                loaded_keys.add(alpha_name)
            if "{}.dora_scale".format(x) in lora:
                loaded_keys.add("{}.dora_scale".format(x))
            # LoRAAdapter
            for up, down in LORA_NAMES:
                A_name = up.format(x)
                if A_name in lora:
                    if up == "{}.lora_up.weight" and "{}.lora_mid.weight".format(x) in lora:
                        loaded_keys.add("{}.lora_mid.weight".format(x))
                    if "{}.reshape_weight".format(x) in lora:
                        loaded_keys.add("{}.reshape_weight".format(x))
                    if down.format(x) not in lora:
                        raise KeyError(down.format(x))
                    loaded_keys.add(A_name)
                    loaded_keys.add(down.format(x))
                    put(to_load[x], x)
                    break
            # LoHaAdapter
            if "{}.hada_w1_a".format(x) in lora:
                names = ["hada_w1_a", "hada_w1_b", "hada_w2_a", "hada_w2_b"]
                if "{}.hada_t1".format(x) in lora:
                    names += ["hada_t1", "hada_t2"]
                for n in names:
                    if "{}.{}".format(x, n) not in lora:
                        raise KeyError("{}.{}".format(x, n))
                    loaded_keys.add("{}.{}".format(x, n))
                put(to_load[x], x)
            # LoKrAdapter
            present = [n for n in ("lokr_w1", "lokr_w2", "lokr_w1_a", "lokr_w1_b", "lokr_w2_a", "lokr_w2_b", "lokr_t2")
                       if "{}.{}".format(x, n) in lora]
            for n in present:
                loaded_keys.add("{}.{}".format(x, n))
            if any(n in present for n in ("lokr_w1", "lokr_w2", "lokr_w1_a", "lokr_w2_a")):
                put(to_load[x], x)
            bias_target = "{}.bias".format(to_load[x][:-len(".weight")])
            if "{}.w_norm".format(x) in lora:
                loaded_keys.add("{}.w_norm".format(x))
                put(to_load[x], x)
                if "{}.b_norm".format(x) in lora:
                    loaded_keys.add("{}.b_norm".format(x))
                    put(bias_target, x)
            if "{}.diff".format(x) in lora:
                loaded_keys.add("{}.diff".format(x))
                put(to_load[x], x)
            if "{}.diff_b".format(x) in lora:
                loaded_keys.add("{}.diff_b".format(x))
                put(bias_target, x)
            if "{}.set_weight".format(x) in lora:
                loaded_keys.add("{}.set_weight".format(x))
                put(to_load[x], x)
        except KeyError as e:
            return patch_dict, loaded_keys, "KeyError: {}".format(e.args[0])
    return patch_dict, loaded_keys, None


def patch_key_text(target):
    """How genscope (and ComfyUI's print of a patch_dict key) writes a target."""
    if isinstance(target, tuple):
        if len(target) > 2:
            return "('{}', None, {})".format(target[0], target[2])
        return repr(target)
    return target


def load_lora_for_models(lora_keys, model_sdk, clip_sdk, shapes, family, config):
    """The whole LoraLoader: returns a dict of what ComfyUI prints and applies.
    lora_keys: the LoRA file's keys; model_sdk / clip_sdk: ordered model keys."""
    key_map = {}
    model_lora_keys_unet(model_sdk, shapes, family, config, key_map)
    if clip_sdk:
        model_lora_keys_clip(clip_sdk, key_map)
    lora = set(lora_keys)
    patch_dict, loaded_keys, error = load_lora(lora, key_map)
    sdk = set(model_sdk) | set(clip_sdk)
    applied, not_loaded, shadowed = {}, [], []
    for target, writers in patch_dict.items():
        key = target[0] if isinstance(target, tuple) else target
        winner = writers[-1]
        for w in writers[:-1]:
            if w != winner:
                shadowed.append([w, winner, patch_key_text(target)])
        if key not in sdk:
            not_loaded.append(patch_key_text(target))
        else:
            applied.setdefault(winner, []).append(patch_key_text(target))
    return {"lora_key_not_loaded": sorted(k for k in lora_keys if k not in loaded_keys),
            "not_loaded": not_loaded, "applied": applied, "shadowed": shadowed, "error": error}
