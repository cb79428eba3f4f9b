"""Tiny real diffusers pipelines (StableDiffusionPipeline, StableDiffusionXLPipeline) with the
conditioning widths of the real models, for tests/peers/diffusers_check.py.

Every class is the real one (diffusers 0.27.2 with transformers 4.48, or the newest pinned
diffusers and transformers: tests/peers/requirements-*.txt): UNet2DConditionModel,
AutoencoderKL, CLIPTextModel, CLIPTextModelWithProjection, CLIPTokenizer and the schedulers.
Depth and channels are tiny (one or two layers, a few channels) so a 64x64 image takes well
under a second per step on one core; the widths the family checks read are the real ones:
SD1.5's CLIP-L context 768; SDXL's CLIP-L 768 and OpenCLIP-G 1280 (penultimate hidden states
joined: 2048), pooled text_embeds 1280, time ids 6 x 256 (UNet add_embedding input 2816).
Weights are random with a fixed seed. The tokenizer's files are generated here (CLIP's
byte-level BPE alphabet, two merges, the two special tokens); nothing is downloaded.
"""
import json
import os
import tempfile

import torch


def _byte_alphabet():
    """CLIP's (GPT-2's) table mapping the 256 bytes to printable characters."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in keep]
    return [chr(b) for b in keep] + [chr(256 + i) for i in range(len(extra))]


def make_tokenizer():
    from transformers import CLIPTokenizer
    from transformers import tokenization_utils_base as tub

    # transformers' stand-in AddedToken, used where the compiled tokenizers package is missing
    if tub.AddedToken.__hash__ is None:  # transformers#30696
        tub.AddedToken.__hash__ = lambda self: hash(self.content)
    if not hasattr(tub.AddedToken, "__setstate__"):
        tub.AddedToken.__setstate__ = lambda self, state: self.__dict__.update(state)
    chars = _byte_alphabet()
    tokens = chars + [c + "</w>" for c in chars] + ["ca", "cat</w>", "<|startoftext|>", "<|endoftext|>"]
    with tempfile.TemporaryDirectory() as d:
        vocab, merges = os.path.join(d, "vocab.json"), os.path.join(d, "merges.txt")
        with open(vocab, "w", encoding="utf-8") as f:
            json.dump({t: i for i, t in enumerate(tokens)}, f, ensure_ascii=False)
        with open(merges, "w", encoding="utf-8") as f:
            f.write("#version: 0.2\nc a\nca t</w>\n")
        return CLIPTokenizer(vocab, merges, model_max_length=77)


def _clip_config(tokenizer, width, **extra):
    from transformers import CLIPTextConfig

    return CLIPTextConfig(
        vocab_size=len(tokenizer), hidden_size=width, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=width // 64, max_position_embeddings=77, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, **extra)


def _vae():
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=4, block_out_channels=(8, 16), norm_num_groups=4,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"))


def _scheduler(name):
    import diffusers

    cls = getattr(diffusers, name)
    return cls(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1)


def sd15(scheduler="EulerDiscreteScheduler"):
    """StableDiffusionPipeline: CLIP-L context 768."""
    from diffusers import StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel

    tokenizer = make_tokenizer()
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(8, 16), layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=768,
        attention_head_dim=4, norm_num_groups=4)
    pipe = StableDiffusionPipeline(
        vae=_vae(), text_encoder=CLIPTextModel(_clip_config(tokenizer, 768)), tokenizer=tokenizer,
        unet=unet, scheduler=_scheduler(scheduler), safety_checker=None, feature_extractor=None,
        requires_safety_checker=False)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def sdxl(scheduler="EulerDiscreteScheduler"):
    """StableDiffusionXLPipeline: CLIP-L 768 + OpenCLIP-G 1280 = 2048, pooled 1280, ADM 2816."""
    from diffusers import StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    tokenizer, tokenizer_2 = make_tokenizer(), make_tokenizer()
    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        sample_size=32, in_channels=4, out_channels=4, block_out_channels=(8, 16), layers_per_block=1,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"), cross_attention_dim=2048,
        attention_head_dim=4, norm_num_groups=4, use_linear_projection=True,
        addition_embed_type="text_time", addition_time_embed_dim=256,
        projection_class_embeddings_input_dim=1280 + 6 * 256)
    pipe = StableDiffusionXLPipeline(
        vae=_vae(), text_encoder=CLIPTextModel(_clip_config(tokenizer, 768)),
        text_encoder_2=CLIPTextModelWithProjection(_clip_config(tokenizer_2, 1280, projection_dim=1280)),
        tokenizer=tokenizer, tokenizer_2=tokenizer_2, unet=unet, scheduler=_scheduler(scheduler))
    pipe.set_progress_bar_config(disable=True)
    return pipe
