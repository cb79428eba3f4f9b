"""The genscope step kind of a ComfyUI node, from its class name.

Rules are shell-style patterns over the class name, tried in order; the first match wins.
Anything else is `custom`, with the class name in the step's `comfyui.class_type` label. The
patterns cover the stock nodes of ComfyUI's image and video workflows (nodes.py and
comfy_extras, v0.3.18 to today: UNETLoader, DualCLIPLoader, CLIPTextEncodeFlux,
TextEncodeQwenImageEdit, EmptySD3LatentImage, EmptyHunyuanLatentVideo, WanImageToVideo,
SamplerCustomAdvanced, VAEDecodeTiled, SaveVideo, ...); tests/test_comfyui_package.py lists
every stock class checked and its kind.
"""

from fnmatch import fnmatchcase

_RULES = (
    # Names a broader pattern below would misfile.
    ("KSamplerSelect", "custom"),  # picks a sampler object; SamplerCustom* runs it
    ("ModelMergeMochiPreview", "custom"),  # a model merge, not a preview
    ("*TextEncode*", "text_encoding"),  # CLIPTextEncode*, TextEncodeQwenImageEdit*, ...
    ("LoraLoader*", "lora_application"),
    ("LoraModelLoader", "lora_application"),
    ("CheckpointLoader*", "model_loading"),
    ("*Loader", "model_loading"),  # UNETLoader, CLIPLoader, DualCLIPLoader, VAELoader, ...
    ("*Empty*Latent*", "latent_generation"),  # EmptyLatentImage, EmptySD3LatentImage, video ones
    ("VAEEncode*", "latent_generation"),
    ("*_VAEEncode", "latent_generation"),
    ("*ToVideo", "latent_generation"),  # WanImageToVideo, LTXVImgToVideo: image -> video latent
    ("*ToVideoLatent", "latent_generation"),
    ("*ToVideoExtend", "latent_generation"),
    ("KSampler*", "sampling"),
    ("SamplerCustom*", "sampling"),
    ("VAEDecode*", "vae_decode"),
    ("Save*", "save"),
    ("*Save", "save"),  # CheckpointSave, VAESave, ...
    ("Preview*", "save"),
    ("*Preview", "save"),  # MaskPreview
)


def step_kind(class_type):
    """`model_loading`, `lora_application`, ... or `custom` for a class genscope has no kind for."""
    name = str(class_type or "")
    for pattern, kind in _RULES:
        if fnmatchcase(name, pattern):
            return kind
    return "custom"
