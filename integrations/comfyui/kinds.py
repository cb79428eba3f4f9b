"""The genscope step kind of a ComfyUI node, from its class name."""

# (prefix or exact name, kind); the first match wins. Anything else: "custom", with the class
# name in the step's `comfyui.class_type` label.
_RULES = (
    ("CheckpointLoader", "model_loading"),
    ("LoraLoader", "lora_application"),
    ("CLIPTextEncode", "text_encoding"),
    ("EmptyLatentImage", "latent_generation"),
    ("VAEEncode", "latent_generation"),
    ("KSampler", "sampling"),
    ("VAEDecode", "vae_decode"),
    ("Save", "save"),
    ("Preview", "save"),
)


def step_kind(class_type):
    """`model_loading`, `lora_application`, ... or `custom` for a class genscope has no kind for.

    CheckpointLoader* (CheckpointLoaderSimple, ...), LoraLoader* (LoraLoaderModelOnly),
    CLIPTextEncode* (CLIPTextEncodeSDXL, ...), EmptyLatentImage, VAEEncode* (VAEEncodeTiled,
    VAEEncodeForInpaint), KSampler* (KSamplerAdvanced), VAEDecode* (VAEDecodeTiled), Save*,
    Preview* (SaveImage, PreviewImage, SaveAnimatedWEBP, ...).
    """
    name = str(class_type or "")
    for prefix, kind in _RULES:
        if name.startswith(prefix):
            return kind
    return "custom"
