"""A small but real PyTorch text-to-image pipeline, laid out as diffusers lays out its own.

Attributes ``tokenizer``, ``text_encoder`` (and with ``dual=True`` ``tokenizer_2``,
``text_encoder_2``), ``unet``, ``vae``, ``scheduler``; outputs shaped like transformers' and
diffusers' (``last_hidden_state``/``pooler_output``, ``text_embeds``, ``.sample``,
``.prev_sample``, ``.latent_dist``). The networks are real torch modules (attention,
convolutions, time embedding), randomly initialised with a fixed seed and run on the CPU (or
on CUDA with ``device="cuda"``). ``__call__`` follows diffusers' StableDiffusionPipeline:
encode the prompt and the negative prompt, set the timesteps, draw (or VAE-encode) the initial
latents, denoise with classifier-free guidance (one batched UNet call per step, or two calls
with ``cfg_batched=False``; with ``dual=True`` the UNet also gets the pooled ``text_embeds``
in ``added_cond_kwargs``, as SDXL's does), decode. ``manual_generation`` runs the same
computation with genscope steps placed by hand. ``HeunScheduler`` is a second-order
scheduler shaped like diffusers' (assign it to ``pipe.scheduler``).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelOutput:
    """Named fields, also indexable by position (like transformers' ModelOutput)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)
        self._order = list(fields)

    def __getitem__(self, i: Any) -> Any:
        return getattr(self, self._order[i] if isinstance(i, int) else i)


class Config:
    def __init__(self, **values: Any) -> None:
        self.__dict__.update(values)


class CharTokenizer:
    """Characters to ids, padded to 77 like CLIP's tokenizer (BOS 1, EOS/pad 0)."""

    model_max_length = 77

    def __init__(self, vocab: int = 512) -> None:
        self.vocab = vocab

    def __call__(self, texts: List[str], **_: Any) -> ModelOutput:
        rows = []
        for text in texts:
            ids = [1] + [2 + ord(c) % (self.vocab - 2) for c in text][: self.model_max_length - 2]
            rows.append(ids + [0] * (self.model_max_length - len(ids)))
        return ModelOutput(input_ids=torch.tensor(rows, dtype=torch.long))


class TextEncoder(nn.Module):
    """Token embedding + transformer layers; returns last_hidden_state and a pooled vector
    (``pooler_output``, or ``text_embeds`` through a projection like CLIPTextModelWithProjection)."""

    def __init__(self, width: int, vocab: int = 512, layers: int = 1,
                 projection: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(torch.randn(77, width) * 0.02)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, nhead=8, dim_feedforward=2 * width, dropout=0.0,
                                       batch_first=True) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.projection = nn.Linear(width, width, bias=False) if projection else None

    def forward(self, input_ids: torch.Tensor, return_dict: bool = True) -> Any:
        h = self.embed(input_ids) + self.position[: input_ids.shape[1]]
        for layer in self.layers:
            h = layer(h)
        h = self.norm(h)
        pooled = h[torch.arange(h.shape[0]), 0]
        if self.projection is not None:
            embeds = self.projection(pooled)
            return ModelOutput(text_embeds=embeds, last_hidden_state=h) if return_dict else (embeds, h)
        return ModelOutput(last_hidden_state=h, pooler_output=pooled) if return_dict else (h, pooled)


def timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
    args = t.float().reshape(-1, 1) * freqs.to(t.device).reshape(1, -1)
    return torch.cat([torch.cos(args), torch.sin(args)], dim=1)


class TinyUNet(nn.Module):
    """Conv in, time embedding, one down block with cross-attention on the text context, one
    up block with a skip connection, conv out: a UNet2DConditionModel in miniature. With
    ``pooled_dim`` the pooled text embedding (``added_cond_kwargs["text_embeds"]``, as SDXL's
    UNet takes it) is added to the time embedding."""

    def __init__(self, channels: int = 32, context_dim: int = 768, latent_channels: int = 4,
                 pooled_dim: Optional[int] = None) -> None:
        super().__init__()
        self.config = Config(in_channels=latent_channels)
        self.time_mlp = nn.Sequential(nn.Linear(64, channels), nn.SiLU(), nn.Linear(channels, channels))
        self.add_embedding = nn.Linear(pooled_dim, channels) if pooled_dim else None
        self.conv_in = nn.Conv2d(latent_channels, channels, 3, padding=1)
        self.down = nn.Conv2d(channels, 2 * channels, 3, stride=2, padding=1)
        self.attention = nn.MultiheadAttention(2 * channels, num_heads=4, kdim=context_dim,
                                               vdim=context_dim, batch_first=True)
        self.up = nn.ConvTranspose2d(2 * channels, channels, 4, stride=2, padding=1)
        self.conv_out = nn.Conv2d(channels, latent_channels, 3, padding=1)

    def forward(self, sample: torch.Tensor, timestep: Any, encoder_hidden_states: torch.Tensor,
                added_cond_kwargs: Optional[Dict[str, torch.Tensor]] = None,
                return_dict: bool = True) -> Any:
        t = torch.as_tensor(timestep, device=sample.device).reshape(-1)
        temb = self.time_mlp(timestep_embedding(t, 64)).expand(sample.shape[0], -1)
        if self.add_embedding is not None:
            temb = temb + self.add_embedding(added_cond_kwargs["text_embeds"])
        h = self.conv_in(sample) + temb[:, :, None, None]
        d = F.silu(self.down(h))
        b, c, hh, ww = d.shape
        q = d.flatten(2).transpose(1, 2)
        attended, _ = self.attention(q, encoder_hidden_states, encoder_hidden_states,
                                     need_weights=False)
        d = d + attended.transpose(1, 2).reshape(b, c, hh, ww)
        u = F.silu(self.up(d)) + h
        out = self.conv_out(u)
        return ModelOutput(sample=out) if return_dict else (out,)


class DDIMScheduler:
    """Deterministic DDIM (eta = 0) over SD's scaled-linear beta schedule."""

    def __init__(self, num_train_timesteps: int = 1000) -> None:
        betas = torch.linspace(0.00085 ** 0.5, 0.012 ** 0.5, num_train_timesteps,
                               dtype=torch.float64) ** 2
        self.alphas_cumprod = torch.cumprod(1.0 - betas, dim=0)
        self.num_train_timesteps = num_train_timesteps
        self.init_noise_sigma = 1.0
        self.timesteps: Optional[torch.Tensor] = None

    def set_timesteps(self, num_inference_steps: int, device: Any = None) -> None:
        step = self.num_train_timesteps // num_inference_steps
        self.timesteps = (torch.arange(num_inference_steps - 1, -1, -1) * step + 1).to(device)
        self.step_ratio = step

    def scale_model_input(self, sample: torch.Tensor, timestep: Any) -> torch.Tensor:
        return sample

    def step(self, model_output: torch.Tensor, timestep: Any, sample: torch.Tensor,
             return_dict: bool = True) -> Any:
        t = int(timestep)
        prev = t - self.step_ratio
        a_t = self.alphas_cumprod[t].item()
        a_prev = self.alphas_cumprod[prev].item() if prev >= 0 else 1.0
        x0 = (sample - math.sqrt(1 - a_t) * model_output) / math.sqrt(a_t)
        prev_sample = math.sqrt(a_prev) * x0 + math.sqrt(1 - a_prev) * model_output
        return ModelOutput(prev_sample=prev_sample) if return_dict else (prev_sample,)

    def add_noise(self, latents: torch.Tensor, noise: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        a = self.alphas_cumprod[int(t.reshape(-1)[0])].item()
        return math.sqrt(a) * latents + math.sqrt(1 - a) * noise


class HeunScheduler(DDIMScheduler):
    """Second order, laid out as diffusers' HeunDiscreteScheduler: ``order = 2``; timesteps
    ``[t0, t1, t1, ..., t(n-1), t(n-1)]`` (2n - 1, one model evaluation each);
    ``step_index`` advances on every step(). A step() at a timestep's first visit predicts the
    next one (DDIM); the following step() corrects that from the same start with the mean of
    the two model outputs; the last timestep is a single first-order step."""

    order = 2

    def set_timesteps(self, num_inference_steps: int, device: Any = None) -> None:
        super().set_timesteps(num_inference_steps, device)
        t = self.timesteps
        self.timesteps = torch.cat([t[:1], t[1:].repeat_interleave(2)])
        self._step_index: Optional[int] = None
        self._pending: Optional[tuple] = None  # (sample, model output, timestep) to correct

    @property
    def step_index(self) -> Optional[int]:
        return self._step_index

    def step(self, model_output: torch.Tensor, timestep: Any, sample: torch.Tensor,
             return_dict: bool = True) -> Any:
        if self._pending is None:
            self._pending = (sample, model_output, timestep)
            prev = super().step(model_output, timestep, sample, return_dict=False)[0]
        else:
            start, first_output, first_t = self._pending
            self._pending = None
            prev = super().step((first_output + model_output) / 2, first_t, start,
                                return_dict=False)[0]
        self._step_index = (self._step_index or 0) + 1
        return ModelOutput(prev_sample=prev) if return_dict else (prev,)


class DiagonalGaussian:
    def __init__(self, moments: torch.Tensor) -> None:
        self.mean, logvar = torch.chunk(moments, 2, dim=1)
        self.std = torch.exp(0.5 * logvar.clamp(-30, 20))

    def sample(self, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        noise = torch.randn(self.mean.shape, generator=generator, dtype=self.mean.dtype)
        return self.mean + self.std * noise.to(self.mean.device)


class TinyVAE(nn.Module):
    """Encoder to 4 latent channels at 1/8 resolution and the matching decoder."""

    def __init__(self, channels: int = 32) -> None:
        super().__init__()
        self.config = Config(scaling_factor=0.18215)
        self.encoder = nn.Sequential(
            nn.Conv2d(3, channels, 3, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(channels, channels, 3, stride=2, padding=1), nn.SiLU(),
            nn.Conv2d(channels, 8, 3, stride=2, padding=1))
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(4, channels, 4, stride=2, padding=1), nn.SiLU(),
            nn.ConvTranspose2d(channels, channels, 4, stride=2, padding=1), nn.SiLU(),
            nn.ConvTranspose2d(channels, 3, 4, stride=2, padding=1), nn.Tanh())

    def encode(self, x: torch.Tensor, return_dict: bool = True) -> Any:
        dist = DiagonalGaussian(self.encoder(x))
        return ModelOutput(latent_dist=dist) if return_dict else (dist,)

    def decode(self, z: torch.Tensor, return_dict: bool = True) -> Any:
        image = self.decoder(z)
        return ModelOutput(sample=image) if return_dict else (image,)


class TinyPipeline:
    """Text-to-image (and image-to-image with ``image=``) with diffusers' attribute names."""

    def __init__(self, *, dual: bool = False, channels: int = 32, seed: int = 0,
                 device: str = "cpu") -> None:
        torch.manual_seed(seed)
        self.device = torch.device(device)
        self.tokenizer = CharTokenizer()
        self.text_encoder = TextEncoder(768)
        context, pooled = 768, None
        if dual:  # SDXL-like: a second encoder, widths concatenated, pooled text_embeds
            self.tokenizer_2 = CharTokenizer()
            self.text_encoder_2 = TextEncoder(1280, projection=True)
            context, pooled = 768 + 1280, 1280
        self.unet = TinyUNet(channels, context, pooled_dim=pooled)
        self.vae = TinyVAE(channels)
        self.scheduler = DDIMScheduler()
        for module in self.modules():
            module.to(self.device).eval().requires_grad_(False)
        self._num_timesteps = 0

    def modules(self) -> List[nn.Module]:
        return [m for m in (getattr(self, n, None) for n in
                            ("text_encoder", "text_encoder_2", "unet", "vae")) if m is not None]

    @property
    def num_timesteps(self) -> int:
        return self._num_timesteps

    def encode_prompt(self, prompt: str) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        """(context: the encoders' last hidden states joined, pooled: the last encoder's
        text_embeds when it has them), like SDXL's encode_prompt."""
        contexts, pooled = [], None
        for tok, enc in (("tokenizer", "text_encoder"), ("tokenizer_2", "text_encoder_2")):
            if getattr(self, enc, None) is None:
                continue
            ids = getattr(self, tok)([prompt]).input_ids.to(self.device)
            out = getattr(self, enc)(ids)
            contexts.append(out.last_hidden_state)
            pooled = getattr(out, "text_embeds", None)
        return torch.cat(contexts, dim=-1), pooled

    def prepare_latents(self, height: int, width: int, generator: torch.Generator,
                        image: Optional[torch.Tensor], timesteps: torch.Tensor) -> torch.Tensor:
        shape = (1, 4, height // 8, width // 8)
        if image is None:
            noise = torch.randn(shape, generator=generator)
            return noise.to(self.device) * self.scheduler.init_noise_sigma
        latents = self.vae.encode(image.to(self.device)).latent_dist.sample(generator)
        latents = latents * self.vae.config.scaling_factor
        noise = torch.randn(latents.shape, generator=generator).to(self.device)
        return self.scheduler.add_noise(latents, noise, timesteps[:1])

    def denoise_once(self, latents: torch.Tensor, t: torch.Tensor, cond: Tuple[Any, Any],
                     uncond: Tuple[Any, Any], guidance_scale: float,
                     cfg_batched: bool) -> torch.Tensor:
        """One guided step; cond / uncond are encode_prompt's (context, pooled)."""
        model_input = self.scheduler.scale_model_input(latents, t)

        def added(*pooled: Optional[torch.Tensor]) -> Dict[str, Any]:
            if pooled[0] is None:
                return {}
            return {"added_cond_kwargs": {"text_embeds": torch.cat(pooled)}}

        if cfg_batched:
            eps = self.unet(torch.cat([model_input] * 2), t,
                            encoder_hidden_states=torch.cat([uncond[0], cond[0]]),
                            **added(uncond[1], cond[1])).sample
            eps_uncond, eps_cond = eps.chunk(2)
        else:
            eps_uncond = self.unet(model_input, t, encoder_hidden_states=uncond[0],
                                   **added(uncond[1])).sample
            eps_cond = self.unet(model_input, t, encoder_hidden_states=cond[0],
                                 **added(cond[1])).sample
        return eps_uncond + guidance_scale * (eps_cond - eps_uncond)

    @torch.no_grad()
    def __call__(self, prompt: str, negative_prompt: str = "", *, num_inference_steps: int = 4,
                 guidance_scale: float = 5.0, height: int = 64, width: int = 64, seed: int = 0,
                 image: Optional[torch.Tensor] = None, strength: float = 0.75,
                 cfg_batched: bool = True,
                 callback_on_step_end: Optional[Callable[..., Dict[str, Any]]] = None) -> torch.Tensor:
        cond = self.encode_prompt(prompt)
        uncond = self.encode_prompt(negative_prompt)
        generator = torch.Generator().manual_seed(seed)
        self.scheduler.set_timesteps(num_inference_steps, device=self.device)
        timesteps = self.scheduler.timesteps
        if image is not None:
            timesteps = timesteps[int(num_inference_steps * (1 - strength)):]
        latents = self.prepare_latents(height, width, generator, image, timesteps)
        self._num_timesteps = len(timesteps)
        for i, t in enumerate(timesteps):
            eps = self.denoise_once(latents, t, cond, uncond, guidance_scale, cfg_batched)
            latents = self.scheduler.step(eps, t, latents).prev_sample
            if callback_on_step_end is not None:
                outputs = callback_on_step_end(self, i, t, {"latents": latents})
                latents = outputs.pop("latents", latents)
        return self.vae.decode(latents / self.vae.config.scaling_factor).sample


class TwoExpertPipeline(TinyPipeline):
    """Wan 2.2 A14B's layout: ``transformer`` denoises the high-noise timesteps (t >= the
    boundary, ``config.boundary_ratio`` of the training timesteps), ``transformer_2`` the rest."""

    def __init__(self, boundary_ratio: float = 0.5, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.transformer = self.unet
        del self.unet
        self.transformer_2 = TinyUNet(32, 768).eval().requires_grad_(False)  # dual=False's widths
        self.config = {"boundary_ratio": boundary_ratio}

    def modules(self) -> List[nn.Module]:
        return [m for m in (getattr(self, n, None) for n in
                            ("text_encoder", "unet", "transformer", "transformer_2", "vae"))
                if m is not None]

    def denoise_once(self, latents: torch.Tensor, t: torch.Tensor, cond: Tuple[Any, Any],
                     uncond: Tuple[Any, Any], guidance_scale: float,
                     cfg_batched: bool) -> torch.Tensor:
        boundary = self.config["boundary_ratio"] * self.scheduler.num_train_timesteps
        self.unet = self.transformer if int(t) >= boundary else self.transformer_2
        try:
            return super().denoise_once(latents, t, cond, uncond, guidance_scale, cfg_batched)
        finally:
            del self.unet


@torch.no_grad()
def manual_generation(pipe: TinyPipeline, run: Any, prompt: str, negative_prompt: str = "", *,
                      num_inference_steps: int = 4, guidance_scale: float = 5.0,
                      height: int = 64, width: int = 64, seed: int = 0,
                      image: Optional[torch.Tensor] = None, strength: float = 0.75,
                      cfg_batched: bool = True) -> torch.Tensor:
    """TinyPipeline.__call__ with genscope steps placed by hand (what instrument() replaces)."""
    contexts = {}
    for which, text in (("cond", prompt), ("uncond", negative_prompt)):
        parts, pooled = [], None
        for tok, enc in (("tokenizer", "text_encoder"), ("tokenizer_2", "text_encoder_2")):
            if getattr(pipe, enc, None) is None:
                continue
            with run.step("text_encoding", enc) as step:
                ids = getattr(pipe, tok)([text]).input_ids
                out = getattr(pipe, enc)(ids.to(pipe.device))
                step.add_counter("tokens", ids.numel())
                step.analyze_tensor("conditioning", out.last_hidden_state, "conditioning")
            parts.append(out.last_hidden_state)
            pooled = getattr(out, "text_embeds", None)
        contexts[which] = (torch.cat(parts, dim=-1), pooled)
    generator = torch.Generator().manual_seed(seed)
    pipe.scheduler.set_timesteps(num_inference_steps, device=pipe.device)
    timesteps = pipe.scheduler.timesteps
    if image is not None:
        timesteps = timesteps[int(num_inference_steps * (1 - strength)):]
        with run.step("latent_generation", "vae.encode"):
            latents = pipe.prepare_latents(height, width, generator, image, timesteps)
    else:
        latents = pipe.prepare_latents(height, width, generator, image, timesteps)
    with run.step("sampling", "denoise") as step:
        step.begin_iterations()
        for t in timesteps:
            eps = pipe.denoise_once(latents, t, contexts["cond"], contexts["uncond"],
                                    guidance_scale, cfg_batched)
            latents = pipe.scheduler.step(eps, t, latents).prev_sample
            step.mark_iteration()
        step.analyze_tensor("latents", latents, "latent")
    with run.step("vae_decode", "vae.decode"):
        return pipe.vae.decode(latents / pipe.vae.config.scaling_factor).sample
