"""Tiny real pipelines of today's diffusers (issue 26) for tests/peers/modern_check.py.

Every class is the real one from the newest diffusers / transformers on PyPI
(tests/peers/requirements-modern.txt): FluxPipeline, WanPipeline (Wan 2.1, Wan 2.2 A14B
with ``transformer_2`` and ``boundary_ratio``, Wan 2.2 TI2V-5B), WanImageToVideoPipeline,
StableDiffusion3Pipeline, QwenImagePipeline, LTXPipeline, LTX2Pipeline (audio + video; LTX-2.0 and LTX-2.3) and
LTX2ImageToVideoPipeline, HunyuanVideoPipeline, HunyuanVideo15Pipeline, Flux2Pipeline, Flux2KleinPipeline, their
transformers, VAEs and text and image encoders (LTX-2: also its text connectors, audio VAE and
vocoder). Depth is one
layer and the inner widths are a few channels, so a step takes well under a second on one
core; the widths genscope's family checks read are the real ones: T5-XXL / umT5-XXL / Llama
4096, CLIP-L 768 (pooled 768), CLIP-G 1280 (SD3's pooled 768 + 1280 = 2048), Qwen2.5-VL 3584,
Gemma-3-12B 3840 (LTX-2; LTX-2.3's connectors project it to 4096 video, 2048 audio),
and the latent channels (16, LTX 128) and VAE factors (8 spatial; 4 temporal for Wan and
HunyuanVideo; 32 x 8 for LTX). Weights are random with a fixed seed.

No file comes from the hub: the tokenizers are built here with the ``tokenizers`` package, a
byte-level BPE without merges (one token per byte) over GPT-2's byte alphabet plus each
family's special tokens, with the post-processing of the real ones (CLIP: start and end
token; T5: end token). Prompts therefore make more tokens than the real tokenizers would;
padding to the pipelines' max lengths keeps the conditioning shapes the real ones.
"""
import torch

SPECIALS = ["<pad>", "</s>", "<unk>", "<|startoftext|>", "<|endoftext|>", "<|im_start|>",
            "<|im_end|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
            "<|eot_id|>"]


def _byte_alphabet():
    """GPT-2's table mapping the 256 bytes to printable characters."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    extra = [b for b in range(256) if b not in keep]
    return [chr(b) for b in keep] + [chr(256 + i) for i in range(len(extra))]


def make_tokenizer(kind, max_length, extra=()):
    """kind: "clip" (start + end token, padded with the end token), "t5" (end token, <pad>),
    "qwen" (no special tokens added, padded with <|endoftext|>), "llama" (begin token).
    `extra`: more special tokens, numbered after the bytes (ids _vocab() on)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIALS + _byte_alphabet() + list(extra))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS + list(extra))
    post = {"clip": ("<|startoftext|> $A <|endoftext|>", ["<|startoftext|>", "<|endoftext|>"]),
            "t5": ("$A </s>", ["</s>"]), "llama": ("<|begin_of_text|> $A", ["<|begin_of_text|>"])}
    if kind in post:
        single, used = post[kind]
        tok.post_processor = processors.TemplateProcessing(
            single=single, special_tokens=[(t, vocab[t]) for t in used])
    special = {
        "clip": dict(bos_token="<|startoftext|>", eos_token="<|endoftext|>", pad_token="<|endoftext|>",
                     unk_token="<unk>"),
        "t5": dict(eos_token="</s>", pad_token="<pad>", unk_token="<unk>"),
        "qwen": dict(eos_token="<|im_end|>", pad_token="<|endoftext|>", unk_token="<unk>"),
        "llama": dict(bos_token="<|begin_of_text|>", eos_token="<|eot_id|>", pad_token="<pad>",
                      unk_token="<unk>"),
    }[kind]
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=max_length,
                                   padding_side="right", **special)


def _vocab():
    return len(SPECIALS) + 256


def _clip(width, projection=None):
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    config = CLIPTextConfig(vocab_size=_vocab(), hidden_size=width, intermediate_size=16,
                            num_hidden_layers=1, num_attention_heads=width // 64,
                            max_position_embeddings=77, bos_token_id=3, eos_token_id=4,
                            pad_token_id=4, projection_dim=projection or width)
    return CLIPTextModelWithProjection(config) if projection else CLIPTextModel(config)


def _t5(umt5=False):
    """T5-XXL class encoder (d_model 4096), one layer."""
    if umt5:
        from transformers import UMT5Config as Config, UMT5EncoderModel as Model
    else:
        from transformers import T5Config as Config, T5EncoderModel as Model
    config = Config(vocab_size=_vocab(), d_model=4096, d_kv=8, d_ff=16, num_layers=1, num_heads=2,
                    relative_attention_num_buckets=8, pad_token_id=0, eos_token_id=1,
                    decoder_start_token_id=0)
    return Model(config)


def _flow_scheduler(**kw):
    from diffusers import FlowMatchEulerDiscreteScheduler

    return FlowMatchEulerDiscreteScheduler(**kw)


def _image_vae(scaling_factor, shift_factor):
    """AutoencoderKL, 16 latent channels, 4 levels (spatial factor 8)."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3, out_channels=3, latent_channels=16, block_out_channels=(4, 4, 4, 4),
        layers_per_block=1, norm_num_groups=2, down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4, scaling_factor=scaling_factor,
        shift_factor=shift_factor, use_quant_conv=False, use_post_quant_conv=False)


def _done(pipe):
    """Eval mode, as from_pretrained leaves them: a module built from a config is in training
    mode, where T5's dropout (rate 0.1) draws from the global RNG and no two calls agree."""
    for module in pipe.components.values():
        if isinstance(module, torch.nn.Module):
            module.eval()
    pipe.set_progress_bar_config(disable=True)
    return pipe


def flux(schnell=False):
    """FluxPipeline: CLIP-L pooled 768, T5-XXL 4096 x 512 (schnell: 256), packed 64-wide
    latents; dev has the guidance embedding."""
    from diffusers import FluxPipeline, FluxTransformer2DModel

    torch.manual_seed(0)
    transformer = FluxTransformer2DModel(
        patch_size=1, in_channels=64, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=4096, pooled_projection_dim=768,
        guidance_embeds=not schnell, axes_dims_rope=(4, 6, 6))
    pipe = FluxPipeline(
        scheduler=_flow_scheduler(shift=1.0 if schnell else 3.0, use_dynamic_shifting=not schnell),
        vae=_image_vae(0.3611, 0.1159), text_encoder=_clip(768),
        tokenizer=make_tokenizer("clip", 77), text_encoder_2=_t5(),
        tokenizer_2=make_tokenizer("t5", 512), transformer=transformer)
    return _done(pipe)


def sd35():
    """StableDiffusion3Pipeline: CLIP-L 768 + CLIP-G 1280 (pooled 2048), T5-XXL 4096; context
    77 + 256 = 333 tokens."""
    from diffusers import SD3Transformer2DModel, StableDiffusion3Pipeline

    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(
        sample_size=32, patch_size=2, in_channels=16, num_layers=2, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=4096, caption_projection_dim=32,
        pooled_projection_dim=2048, out_channels=16, pos_embed_max_size=32,
        dual_attention_layers=(0,), qk_norm="rms_norm")
    pipe = StableDiffusion3Pipeline(
        transformer=transformer, scheduler=_flow_scheduler(shift=3.0),
        vae=_image_vae(1.5305, 0.0609), text_encoder=_clip(768, projection=768),
        tokenizer=make_tokenizer("clip", 77), text_encoder_2=_clip(1280, projection=1280),
        tokenizer_2=make_tokenizer("clip", 77), text_encoder_3=_t5(),
        tokenizer_3=make_tokenizer("t5", 512))
    return _done(pipe)


def _wan_transformer():
    from diffusers import WanTransformer3DModel

    return WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=16,
        out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=32, num_layers=1,
        rope_max_seq_len=32)


def wan(a14b=False):
    """WanPipeline: umT5-XXL 4096 x 512, Wan VAE (16 channels, 8 spatial, 4 temporal). With
    a14b: Wan 2.2 A14B's two experts (transformer for high noise, transformer_2 for low),
    boundary_ratio 0.875."""
    from diffusers import AutoencoderKLWan, WanPipeline

    torch.manual_seed(0)
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    transformer = _wan_transformer()
    extra = dict(transformer_2=_wan_transformer(), boundary_ratio=0.875) if a14b else {}
    pipe = WanPipeline(tokenizer=make_tokenizer("t5", 512), text_encoder=_t5(umt5=True), vae=vae,
                       scheduler=_flow_scheduler(shift=5.0 if not a14b else 12.0),
                       transformer=transformer, **extra)
    return _done(pipe)


def qwen_image():
    """QwenImagePipeline: Qwen2.5-VL hidden states 3584 (prompt template dropped), packed
    64-wide latents, Qwen-Image VAE (16 channels, 8 spatial)."""
    from diffusers import QwenImagePipeline

    torch.manual_seed(0)
    text_encoder = _qwen_vl()
    transformer, vae = _qwen_image_parts()
    pipe = QwenImagePipeline(scheduler=_flow_scheduler(shift=1.0, use_dynamic_shifting=True),
                             vae=vae, text_encoder=text_encoder,
                             tokenizer=make_tokenizer("qwen", 1024), transformer=transformer)
    return _done(pipe)


VISION_SPECIALS = ["<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]


def _qwen_vl(extra_vocab=0):
    """Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration): text hidden 3584, one layer, a one-block
    vision tower merging 2x2 patches of 14 px into 3584-wide image tokens. With extra_vocab the
    vocabulary has VISION_SPECIALS after the bytes, and the config's image / video / vision-start
    token ids are theirs."""
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration

    vocab = _vocab() + extra_vocab
    ids = ({"image_token_id": _vocab() + 2, "video_token_id": _vocab() + 3,
            "vision_start_token_id": _vocab()} if extra_vocab else
           {"image_token_id": vocab - 1, "video_token_id": vocab - 2,
            "vision_start_token_id": vocab - 3})
    text = dict(vocab_size=vocab, hidden_size=3584, intermediate_size=16, num_hidden_layers=1,
                num_attention_heads=112, num_key_value_heads=1, max_position_embeddings=2048,
                rope_scaling={"type": "mrope", "mrope_section": [4, 6, 6], "rope_type": "default"},
                rope_theta=1000000.0)
    config = Qwen2_5_VLConfig(
        text_config=text, vision_config=dict(depth=1, hidden_size=16, intermediate_size=16,
                                             num_heads=2, out_hidden_size=3584, patch_size=14,
                                             spatial_merge_size=2, temporal_patch_size=2),
        vocab_size=vocab, hidden_size=3584, **ids)
    return Qwen2_5_VLForConditionalGeneration(config)


def _qwen_image_parts():
    from diffusers import AutoencoderKLQwenImage, QwenImageTransformer2DModel

    transformer = QwenImageTransformer2DModel(
        patch_size=2, in_channels=64, out_channels=16, num_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=3584, axes_dims_rope=(8, 4, 4))
    vae = AutoencoderKLQwenImage(base_dim=4, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                                 temperal_downsample=[False, True, True])
    return transformer, vae


def qwen_image_edit(plus=False):
    """QwenImageEditPipeline: the prompt encoded with the input image by Qwen2.5-VL (its vision
    tower; Qwen2VLProcessor with a pixel budget of 112 x 112, so 16 image tokens), the image
    also through the VAE (the pipeline resizes it to about 1024 x 1024 first) and its latents
    packed next to the noise; otherwise Qwen-Image's widths. plus: QwenImageEditPlusPipeline
    (several input images, each through the vision tower and the VAE)."""
    from diffusers import QwenImageEditPipeline, QwenImageEditPlusPipeline
    from transformers import Qwen2VLImageProcessor, Qwen2VLProcessor, Qwen2VLVideoProcessor

    torch.manual_seed(0)
    text_encoder = _qwen_vl(extra_vocab=len(VISION_SPECIALS))
    transformer, vae = _qwen_image_parts()
    tokenizer = make_tokenizer("qwen", 1024, extra=VISION_SPECIALS)
    pixels = 112 * 112
    processor = Qwen2VLProcessor(
        image_processor=Qwen2VLImageProcessor(min_pixels=pixels, max_pixels=pixels),
        tokenizer=tokenizer, video_processor=Qwen2VLVideoProcessor())
    cls = QwenImageEditPlusPipeline if plus else QwenImageEditPipeline
    pipe = cls(scheduler=_flow_scheduler(shift=1.0, use_dynamic_shifting=True), vae=vae,
               text_encoder=text_encoder, tokenizer=tokenizer, processor=processor,
               transformer=transformer)
    return _done(pipe)


def ltx():
    """LTXPipeline: T5-XXL 4096 x 128, LTX VAE (128 channels, 32 spatial, 8 temporal)."""
    from diffusers import AutoencoderKLLTXVideo, LTXPipeline, LTXVideoTransformer3DModel

    torch.manual_seed(0)
    vae = AutoencoderKLLTXVideo(
        in_channels=3, out_channels=3, latent_channels=128, block_out_channels=(8, 8, 8, 8),
        decoder_block_out_channels=(8, 8, 8, 8), layers_per_block=(1, 1, 1, 1, 1),
        decoder_layers_per_block=(1, 1, 1, 1, 1),
        spatio_temporal_scaling=(True, True, True, False),
        decoder_spatio_temporal_scaling=(True, True, True, False),
        decoder_inject_noise=(False,) * 5, upsample_residual=(False,) * 4,
        upsample_factor=(1,) * 4, timestep_conditioning=False, patch_size=4, patch_size_t=1,
        encoder_causal=True, decoder_causal=False)
    transformer = LTXVideoTransformer3DModel(
        in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=2,
        attention_head_dim=8, cross_attention_dim=16, num_layers=1, caption_channels=4096)
    pipe = LTXPipeline(scheduler=_flow_scheduler(shift=1.0, use_dynamic_shifting=True), vae=vae,
                       text_encoder=_t5(), tokenizer=make_tokenizer("t5", 128),
                       transformer=transformer)
    return _done(pipe)


def hunyuan_video():
    """HunyuanVideoPipeline: Llama hidden states 4096 (template cropped), CLIP-L pooled 768,
    Hunyuan VAE (16 channels, 8 spatial, 4 temporal)."""
    from diffusers import (AutoencoderKLHunyuanVideo, HunyuanVideoPipeline,
                           HunyuanVideoTransformer3DModel)
    from transformers import LlamaConfig, LlamaModel

    torch.manual_seed(0)
    llama = LlamaModel(LlamaConfig(vocab_size=_vocab(), hidden_size=4096, intermediate_size=16,
                                   num_hidden_layers=2, num_attention_heads=128,
                                   num_key_value_heads=1, max_position_embeddings=4096,
                                   bos_token_id=7, eos_token_id=10, pad_token_id=0))
    transformer = HunyuanVideoTransformer3DModel(
        in_channels=16, out_channels=16, num_attention_heads=2, attention_head_dim=12,
        num_layers=1, num_single_layers=1, num_refiner_layers=1, patch_size=2, patch_size_t=1,
        text_embed_dim=4096, pooled_projection_dim=768, rope_axes_dim=(4, 4, 4))
    vae = AutoencoderKLHunyuanVideo(
        in_channels=3, out_channels=3, latent_channels=16, block_out_channels=(4, 4, 4, 4),
        layers_per_block=1, norm_num_groups=2,
        down_block_types=("HunyuanVideoDownBlock3D",) * 4,
        up_block_types=("HunyuanVideoUpBlock3D",) * 4, spatial_compression_ratio=8,
        temporal_compression_ratio=4, mid_block_add_attention=False)
    pipe = HunyuanVideoPipeline(
        text_encoder=llama, tokenizer=make_tokenizer("llama", 4096), transformer=transformer,
        vae=vae, scheduler=_flow_scheduler(shift=7.0), text_encoder_2=_clip(768),
        tokenizer_2=make_tokenizer("clip", 77))
    return _done(pipe)


CHAT_TEMPLATE = ("{% for m in messages %}{% if m['content'] is string %}{{ m['content'] }}"
                 "{% else %}{% for c in m['content'] %}{{ c['text'] }}{% endfor %}{% endif %}"
                 "{% endfor %}")


def _chat_tokenizer(max_length):
    """A "qwen" tokenizer with a chat template (text parts of the messages joined), as the
    Flux.2 pipelines' apply_chat_template needs."""
    tok = make_tokenizer("qwen", max_length)
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _flux2_parts(text_dim):
    """Flux2Transformer2DModel (128-wide packed tokens: 2x2 patches of 32 channels) and the
    Flux.2 VAE (32 latent channels, 8 spatial, batch-norm statistics)."""
    from diffusers import AutoencoderKLFlux2, Flux2Transformer2DModel

    transformer = Flux2Transformer2DModel(
        patch_size=1, in_channels=128, num_layers=1, num_single_layers=1, attention_head_dim=16,
        num_attention_heads=2, joint_attention_dim=text_dim, timestep_guidance_channels=32,
        axes_dims_rope=(4, 4, 4, 4), guidance_embeds=text_dim == 15360)
    vae = AutoencoderKLFlux2(block_out_channels=(4, 4, 4, 4), layers_per_block=1,
                             norm_num_groups=2, latent_channels=32)
    return transformer, vae


def flux2():
    """Flux2Pipeline: Mistral-Small-3.1 (Mistral3ForConditionalGeneration, hidden 5120; the
    hidden states of layers 10, 20 and 30, the pipeline's default text_encoder_out_layers, side
    by side: 15360) x 512 tokens, no pooled vector. The encoder has the real 40 layers, each
    with 2 heads of 8 and an MLP 16 wide (1.1 M parameters a layer)."""
    from diffusers import Flux2Pipeline
    from transformers import Mistral3Config, Mistral3ForConditionalGeneration

    torch.manual_seed(0)
    config = Mistral3Config(
        text_config=dict(model_type="mistral", vocab_size=_vocab(), hidden_size=5120,
                         intermediate_size=16, num_hidden_layers=40, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=8, max_position_embeddings=1024),
        vision_config=dict(model_type="pixtral", hidden_size=16, intermediate_size=16,
                           num_hidden_layers=1, num_attention_heads=2, head_dim=8,
                           patch_size=14, image_size=28),
        image_token_index=_vocab() - 1, spatial_merge_size=2)
    text_encoder = Mistral3ForConditionalGeneration(config)
    transformer, vae = _flux2_parts(15360)
    pipe = Flux2Pipeline(scheduler=_flow_scheduler(shift=3.0, use_dynamic_shifting=True),
                         vae=vae, text_encoder=text_encoder, tokenizer=_chat_tokenizer(512),
                         transformer=transformer)
    return _done(pipe)


def flux2_klein(width=2560):
    """Flux2KleinPipeline (not distilled: true CFG, a call per prompt): Qwen3 (hidden 2560 for
    Klein 4B, 4096 for 9B; the hidden states of layers 9, 18 and 27, the pipeline's default
    text_encoder_out_layers, side by side: 7680 / 12288) x 512 tokens; the real 36 layers, each
    with 2 heads of 8 and an MLP 16 wide."""
    from diffusers import Flux2KleinPipeline
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    text_encoder = Qwen3ForCausalLM(Qwen3Config(
        vocab_size=_vocab(), hidden_size=width, intermediate_size=16, num_hidden_layers=36,
        num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=1024))
    transformer, vae = _flux2_parts(3 * width)
    pipe = Flux2KleinPipeline(scheduler=_flow_scheduler(shift=3.0, use_dynamic_shifting=True),
                              vae=vae, text_encoder=text_encoder,
                              tokenizer=_chat_tokenizer(512), transformer=transformer,
                              is_distilled=False)
    return _done(pipe)


def _wan22_ti2v_parts():
    """The Wan 2.2 VAE (48 channels, 16 spatial = 2x2 patchify x 8, 4 temporal) and a
    TI2V-5B-shaped transformer (48 channels in and out)."""
    from diffusers import AutoencoderKLWan, WanTransformer3DModel

    vae = AutoencoderKLWan(base_dim=4, z_dim=48, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True], is_residual=True,
                           in_channels=12, out_channels=12, patch_size=2,
                           scale_factor_spatial=16, scale_factor_temporal=4,
                           latents_mean=[0.0] * 48, latents_std=[1.0] * 48)
    transformer = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=48,
        out_channels=48, text_dim=4096, freq_dim=256, ffn_dim=32, num_layers=1,
        rope_max_seq_len=32)
    return vae, transformer


def wan_ti2v():
    """WanPipeline as Wan 2.2 TI2V-5B: expand_timesteps, the Wan 2.2 VAE (48 channels, 16
    spatial = 2x2 patchify x 8, 4 temporal), umT5-XXL 4096 x 512."""
    from diffusers import WanPipeline

    torch.manual_seed(0)
    vae, transformer = _wan22_ti2v_parts()
    pipe = WanPipeline(tokenizer=make_tokenizer("t5", 512), text_encoder=_t5(umt5=True), vae=vae,
                       scheduler=_flow_scheduler(shift=5.0), transformer=transformer,
                       expand_timesteps=True)
    return _done(pipe)


def wan_ti2v_i2v():
    """WanImageToVideoPipeline as Wan 2.2 TI2V-5B's image-to-video mode: expand_timesteps, no
    image encoder; the first frame through the Wan 2.2 VAE is the first latent frame, kept by a
    mask (a timestep per latent patch)."""
    from diffusers import WanImageToVideoPipeline

    torch.manual_seed(0)
    vae, transformer = _wan22_ti2v_parts()
    pipe = WanImageToVideoPipeline(
        tokenizer=make_tokenizer("t5", 512), text_encoder=_t5(umt5=True), vae=vae,
        scheduler=_flow_scheduler(shift=5.0), transformer=transformer, image_encoder=None,
        image_processor=None, expand_timesteps=True)
    return _done(pipe)


def wan_i2v():
    """WanImageToVideoPipeline (Wan 2.1 I2V): umT5-XXL 4096 x 512, a CLIP ViT-H image encoder
    (hidden 1280; the pipeline takes its penultimate hidden states), the first frame encoded by
    the Wan VAE, the transformer's input 36 channels (16 noise + 4 mask + 16 image latents)."""
    from diffusers import AutoencoderKLWan, WanImageToVideoPipeline, WanTransformer3DModel
    from transformers import CLIPImageProcessor, CLIPVisionConfig, CLIPVisionModel

    torch.manual_seed(0)
    vae = AutoencoderKLWan(base_dim=3, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    image_encoder = CLIPVisionModel(CLIPVisionConfig(
        hidden_size=1280, intermediate_size=16, num_hidden_layers=2, num_attention_heads=2,
        image_size=28, patch_size=14, projection_dim=16))
    processor = CLIPImageProcessor(size={"shortest_edge": 28}, crop_size={"height": 28, "width": 28})
    transformer = WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=36,
        out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=32, num_layers=1,
        image_dim=1280, added_kv_proj_dim=24, rope_max_seq_len=32)
    pipe = WanImageToVideoPipeline(
        tokenizer=make_tokenizer("t5", 512), text_encoder=_t5(umt5=True), vae=vae,
        scheduler=_flow_scheduler(shift=5.0), transformer=transformer,
        image_processor=processor, image_encoder=image_encoder)
    return _done(pipe)


def flux_img2img():
    """FluxImg2ImgPipeline with flux()'s parts: the input image through the VAE, noised to the
    strength's timestep."""
    from diffusers import FluxImg2ImgPipeline

    return _done(FluxImg2ImgPipeline(**flux().components))


def wan_v2v():
    """WanVideoToVideoPipeline with wan()'s parts: the input video through the Wan VAE."""
    from diffusers import WanVideoToVideoPipeline

    parts = wan().components
    return _done(WanVideoToVideoPipeline(**{k: parts[k] for k in (
        "tokenizer", "text_encoder", "transformer", "vae", "scheduler")}))


def first_frame(height, width):
    """A fixed RGB PIL image (the image-to-video pipelines' first frame)."""
    from PIL import Image

    g = torch.Generator().manual_seed(7)
    pixels = (torch.rand(height, width, 3, generator=g) * 255).to(torch.uint8).numpy()
    return Image.fromarray(pixels)


def hunyuan_video15(i2v=False):
    """HunyuanVideo15Pipeline: Qwen2.5-VL text model (hidden 3584; the pipeline takes the
    third-last hidden states and crops the 108-token template: 1000 tokens), ByT5 (d_model
    1472) for quoted glyph text, the HunyuanVideo 1.5 VAE (32 channels, 16 spatial, 4
    temporal), classifier-free guidance through a guider (a call per condition). i2v:
    HunyuanVideo15ImageToVideoPipeline, with a SigLIP image encoder (hidden 1152) for the first
    frame, which also goes through the VAE."""
    from diffusers import (AutoencoderKLHunyuanVideo15, ClassifierFreeGuidance,
                           HunyuanVideo15Pipeline, HunyuanVideo15Transformer3DModel)
    from transformers import Qwen2_5_VLTextConfig, Qwen2_5_VLTextModel, T5Config, T5EncoderModel

    torch.manual_seed(0)
    text_encoder = Qwen2_5_VLTextModel(Qwen2_5_VLTextConfig(
        vocab_size=_vocab(), hidden_size=3584, intermediate_size=16, num_hidden_layers=2,
        num_attention_heads=112, num_key_value_heads=1, max_position_embeddings=2048,
        rope_scaling={"type": "mrope", "mrope_section": [4, 6, 6], "rope_type": "default"}))
    byt5 = T5EncoderModel(T5Config(vocab_size=_vocab(), d_model=1472, d_kv=8, d_ff=16,
                                   num_layers=1, num_heads=2, relative_attention_num_buckets=8,
                                   pad_token_id=0, eos_token_id=1, decoder_start_token_id=0))
    # Encoding (i2v's first frame) needs channels growing as the real ones do (128 .. 1024):
    # its downsampling averages groups of factor x in / out channels.
    channels = (8, 16, 32, 64, 64) if i2v else (32, 32, 32, 32, 32)
    vae = AutoencoderKLHunyuanVideo15(block_out_channels=channels, layers_per_block=1,
                                      latent_channels=32)
    transformer = HunyuanVideo15Transformer3DModel(
        in_channels=65, out_channels=32, num_attention_heads=2, attention_head_dim=16,
        num_layers=1, num_refiner_layers=1, mlp_ratio=1.0, text_embed_dim=3584,
        text_embed_2_dim=1472, image_embed_dim=1152, rope_axes_dim=(4, 6, 6),
        task_type="i2v" if i2v else "t2v", target_size=32)  # i2v's output size: 32 px, not 640
    parts = dict(
        text_encoder=text_encoder, tokenizer=_chat_tokenizer(1108), transformer=transformer,
        vae=vae, scheduler=_flow_scheduler(shift=7.0), text_encoder_2=byt5,
        tokenizer_2=make_tokenizer("t5", 256), guider=ClassifierFreeGuidance(guidance_scale=6.0))
    if not i2v:
        return _done(HunyuanVideo15Pipeline(**parts))
    from diffusers import HunyuanVideo15ImageToVideoPipeline
    from transformers import SiglipImageProcessor, SiglipVisionConfig, SiglipVisionModel

    parts["image_encoder"] = SiglipVisionModel(SiglipVisionConfig(
        hidden_size=1152, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
        image_size=28, patch_size=14))
    parts["feature_extractor"] = SiglipImageProcessor(size={"height": 28, "width": 28})
    return _done(HunyuanVideo15ImageToVideoPipeline(**parts))


def _ltx2_parts(version="2.0"):
    """The components of an LTX-2 pipeline (LTX2Pipeline and its image-to-video and condition
    variants take the same ones). version "2.0": the text connectors' one projection of Gemma
    3's stacked hidden states to 3840, the transformer's caption projections (3840 to its
    widths): 3840-wide video and audio contexts. "2.3": per-modality projections in the
    connectors (per_modality_projections: video 4096, audio 2048 wide, gated attention), no
    caption projection in the transformer (use_prompt_embeddings=False; its cross-attention
    reads the 4096 / 2048-wide contexts), gated attention."""
    from diffusers import (AutoencoderKLLTX2Audio, AutoencoderKLLTX2Video,
                           LTX2VideoTransformer3DModel)
    from diffusers.pipelines.ltx2 import LTX2TextConnectors
    from diffusers.pipelines.ltx2.vocoder import LTX2Vocoder
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    if version not in ("2.0", "2.3"):
        raise ValueError(f"LTX-2 version {version!r}: 2.0 or 2.3")
    v23 = version == "2.3"
    torch.manual_seed(0)
    text = dict(vocab_size=_vocab(), hidden_size=3840, intermediate_size=16, num_hidden_layers=1,
                num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                max_position_embeddings=1024, pad_token_id=0, eos_token_id=1, bos_token_id=7)
    config = Gemma3Config(
        text_config=text, vision_config=dict(hidden_size=16, intermediate_size=16,
                                             num_hidden_layers=1, num_attention_heads=2,
                                             image_size=28, patch_size=14),
        mm_tokens_per_image=4, boi_token_index=_vocab() - 3, eoi_token_index=_vocab() - 2,
        image_token_index=_vocab() - 1)
    text_encoder = Gemma3ForConditionalGeneration(config)
    # the connectors' widths: heads x head dim = the context width they give
    video_heads, audio_heads = (32, 16) if v23 else (30, 30)
    connectors = LTX2TextConnectors(
        caption_channels=3840, text_proj_in_factor=2,
        video_connector_num_attention_heads=video_heads, video_connector_attention_head_dim=128,
        video_connector_num_layers=0, video_connector_num_learnable_registers=None,
        audio_connector_num_attention_heads=audio_heads, audio_connector_attention_head_dim=128,
        audio_connector_num_layers=0, audio_connector_num_learnable_registers=None,
        connector_rope_base_seq_len=128, per_modality_projections=v23, video_hidden_dim=4096,
        audio_hidden_dim=2048, video_gated_attn=v23, audio_gated_attn=v23)
    # LTX-2.3's prompt modulation of the cross-attention (cross_attn_mod) scales the context at
    # the transformer's inner width, which must then be the real 4096 / 2048 (a gigabyte of
    # weights): off here; the contexts genscope reads are the connectors' all the same.
    # The audio stream's inner width is its cross-attention width (the audio-video attention's
    # rope has that size): LTX-2.3's real 2048 (32 heads x 64); LTX-2.0's tiny 16.
    widths = dict(cross_attention_dim=4096, audio_cross_attention_dim=2048,
                  audio_num_attention_heads=32, audio_attention_head_dim=64,
                  use_prompt_embeddings=False, gated_attn=True,
                  audio_gated_attn=True) if v23 else dict(
        cross_attention_dim=16, audio_cross_attention_dim=16, audio_num_attention_heads=2,
        audio_attention_head_dim=8)
    transformer = LTX2VideoTransformer3DModel(
        in_channels=128, out_channels=128, num_attention_heads=2, attention_head_dim=8,
        audio_in_channels=128, audio_out_channels=128, num_layers=1, caption_channels=3840,
        rope_type="split", **widths)
    vae = AutoencoderKLLTX2Video(
        latent_channels=128, block_out_channels=(8, 8, 8, 8), decoder_block_out_channels=(8, 8, 8),
        layers_per_block=(1, 1, 1, 1, 1), decoder_layers_per_block=(1, 1, 1, 1),
        decoder_inject_noise=(False,) * 4, upsample_residual=(False,) * 3,
        upsample_factor=(1, 1, 1), timestep_conditioning=False, decoder_causal=False,
        spatial_compression_ratio=32, temporal_compression_ratio=8)
    audio_vae = AutoencoderKLLTX2Audio(base_channels=128, ch_mult=(1, 1, 1), num_res_blocks=1,
                                       latent_channels=8, mel_bins=64, resolution=32)
    vocoder = LTX2Vocoder(in_channels=2 * 64, hidden_channels=16, out_channels=2,
                          upsample_kernel_sizes=[4, 4], upsample_factors=[2, 2],
                          resnet_kernel_sizes=[3], resnet_dilations=[[1, 3, 5]],
                          output_sampling_rate=16000)
    return dict(scheduler=_flow_scheduler(shift=1.0, use_dynamic_shifting=True), vae=vae,
                audio_vae=audio_vae, text_encoder=text_encoder,
                tokenizer=make_tokenizer("llama", 128), connectors=connectors,
                transformer=transformer, vocoder=vocoder)


def ltx2(version="2.0"):
    """LTX2Pipeline (audio + video): Gemma 3 text encoder (Gemma3ForConditionalGeneration,
    hidden 3840 as Gemma-3-12B; every layer's hidden states stacked: 3840 x 2 for this one-layer
    encoder, 3840 x 49 for the real 48 layers) x 128 tokens, the text connectors
    (LTX2TextConnectors, no connector blocks here, 2 in the real one) giving the transformer
    its video and audio contexts (LTX-2.0: both 3840 wide; LTX-2.3: 4096 and 2048),
    LTX2VideoTransformer3DModel (video tokens (B, N, 128), audio tokens (B, L, 128) = 8 latent
    channels x 16 mel bins), the LTX-2 video VAE (128 channels, 32 spatial, 8 temporal), the
    LTX-2 audio VAE (8 channels, 64 mel bins, 4x mel and time compression) and the vocoder
    (mel spectrogram to waveform)."""
    from diffusers import LTX2Pipeline

    return _done(LTX2Pipeline(**_ltx2_parts(version)))


def ltx2_i2v(version="2.0"):
    """LTX2ImageToVideoPipeline: ltx2()'s components; the first frame through the video VAE
    (vae.encode) is the first latent frame, kept by a mask (a timestep per video token)."""
    from diffusers import LTX2ImageToVideoPipeline

    return _done(LTX2ImageToVideoPipeline(**_ltx2_parts(version)))


def ltx2_condition(version="2.0"):
    """LTX2ConditionPipeline: ltx2()'s components; frames given as conditions
    (ltx2_conditions) are encoded by the video VAE and put at their latent frames."""
    from diffusers import LTX2ConditionPipeline

    return _done(LTX2ConditionPipeline(**_ltx2_parts(version)))


def ltx2_conditions(height, width):
    """LTX2ConditionPipeline's conditions: first_frame(height, width) as the first frame and a
    second image as the last (crf=0: no H.264 re-compression, which needs PyAV)."""
    from diffusers.pipelines.ltx2 import LTX2VideoCondition

    last = first_frame(height, width).transpose(0)  # a mirrored image: another frame
    return [LTX2VideoCondition(frames=first_frame(height, width), index=0, crf=0),
            LTX2VideoCondition(frames=last, index=-1, crf=0)]
