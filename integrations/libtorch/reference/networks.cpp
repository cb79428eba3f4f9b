// Forward passes of the reference networks (functional ATen over a weight map).
#include "networks.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

using at::Tensor;

int groups_for(std::int64_t ch) { return ch % 8 == 0 ? 8 : 1; }

Tensor linear(const Weights& w, const std::string& n, const Tensor& x) {
  auto b = w.find(n + ".bias");
  return at::linear(x, weight(w, n + ".weight"),
                    b == w.end() ? c10::optional<Tensor>() : c10::optional<Tensor>(b->second));
}
Tensor conv(const Weights& w, const std::string& n, const Tensor& x, int stride = 1) {
  const Tensor& k = weight(w, n + ".weight");
  const std::int64_t pad = k.size(2) / 2;
  return at::conv2d(x, k, weight(w, n + ".bias"), {stride, stride}, {pad, pad});
}
Tensor group_norm(const Weights& w, const std::string& n, const Tensor& x) {
  return at::group_norm(x, groups_for(x.size(1)), weight(w, n + ".weight"), weight(w, n + ".bias"),
                        1e-6);
}
Tensor layer_norm(const Weights& w, const std::string& n, const Tensor& x) {
  return at::layer_norm(x, {x.size(-1)}, weight(w, n + ".weight"), weight(w, n + ".bias"), 1e-5);
}

// Multi-head attention: q (B,N,C), k/v (B,M,C); optional additive mask (N,M).
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, int heads,
                 const Tensor& mask = {}) {
  const std::int64_t b = q.size(0), n = q.size(1), m = k.size(1), c = q.size(2);
  const std::int64_t d = c / heads;
  Tensor qh = q.view({b, n, heads, d}).transpose(1, 2);
  Tensor kh = k.view({b, m, heads, d}).transpose(1, 2);
  Tensor vh = v.view({b, m, heads, d}).transpose(1, 2);
  Tensor s = at::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
  if (mask.defined()) s = s + mask;
  Tensor o = at::matmul(at::softmax(s, -1), vh);
  return o.transpose(1, 2).reshape({b, n, c});
}

// Sinusoidal embedding of timesteps t (B) into `dim` features.
Tensor timestep_embedding(const Tensor& t, std::int64_t dim) {
  const std::int64_t half = dim / 2;
  Tensor freqs = at::exp(at::arange(half, t.options().dtype(at::kFloat)) *
                         (-std::log(10000.0) / static_cast<double>(half)));
  Tensor args = t.to(at::kFloat).unsqueeze(1) * freqs.unsqueeze(0);
  return at::cat({at::cos(args), at::sin(args)}, 1);
}

Tensor res_block(const Weights& w, const std::string& n, const Tensor& x, const Tensor& temb = {}) {
  Tensor h = conv(w, n + ".conv1", at::silu(group_norm(w, n + ".norm1", x)));
  if (temb.defined()) h = h + linear(w, n + ".emb", at::silu(temb)).unsqueeze(-1).unsqueeze(-1);
  h = conv(w, n + ".conv2", at::silu(group_norm(w, n + ".norm2", h)));
  const Tensor skip = w.count(n + ".skip.weight") != 0 ? conv(w, n + ".skip", x) : x;
  return skip + h;
}

Tensor spatial_transformer(const Weights& w, const std::string& n, const Tensor& x,
                           const Tensor& context, int heads) {
  const std::int64_t b = x.size(0), c = x.size(1), hh = x.size(2), ww = x.size(3);
  Tensor h = group_norm(w, n + ".norm", x).flatten(2).transpose(1, 2);  // (B, HW, C)
  h = linear(w, n + ".proj_in", h);
  Tensor a = layer_norm(w, n + ".ln1", h);
  h = h + linear(w, n + ".attn1.to_out.0",
                 attention(linear(w, n + ".attn1.to_q", a), linear(w, n + ".attn1.to_k", a),
                           linear(w, n + ".attn1.to_v", a), heads));
  a = layer_norm(w, n + ".ln2", h);
  h = h + linear(w, n + ".attn2.to_out.0",
                 attention(linear(w, n + ".attn2.to_q", a), linear(w, n + ".attn2.to_k", context),
                           linear(w, n + ".attn2.to_v", context), heads));
  a = layer_norm(w, n + ".ln3", h);
  h = h + linear(w, n + ".ff.2", at::gelu(linear(w, n + ".ff.0", a)));
  h = linear(w, n + ".proj_out", h);
  return x + h.transpose(1, 2).reshape({b, c, hh, ww});
}

Tensor upsample2x(const Tensor& x) {
  return at::upsample_nearest2d(x, {x.size(2) * 2, x.size(3) * 2});
}

}  // namespace

Tensor tokenize(std::string_view text, const Preset& p, int& token_count, bool& truncated) {
  const int n = p.context_tokens;
  Tensor tokens = at::full({1, n}, 257, at::kLong);
  auto* t = tokens.data_ptr<std::int64_t>();
  t[0] = 256;
  const std::size_t room = static_cast<std::size_t>(n - 2);
  truncated = text.size() > room;
  const std::size_t used = std::min(text.size(), room);
  for (std::size_t i = 0; i < used; ++i) t[i + 1] = static_cast<unsigned char>(text[i]);
  token_count = static_cast<int>(used) + 2;  // BOS .. EOS, the rest is EOS padding
  return tokens;
}

Tensor text_encoder_forward(const Weights& w, const Preset& p, const Tensor& tokens) {
  const std::int64_t n = tokens.size(1);
  Tensor h = at::embedding(weight(w, "text_model.embeddings.token_embedding.weight"), tokens) +
             weight(w, "text_model.embeddings.position_embedding.weight").narrow(0, 0, n);
  // CLIP's causal mask: token i sees tokens <= i.
  Tensor mask = at::full({n, n}, -INFINITY, h.options()).triu(1);
  for (int i = 0; i < p.text_layers; ++i) {
    const std::string l = "text_model.encoder.layers." + std::to_string(i);
    Tensor a = layer_norm(w, l + ".layer_norm1", h);
    h = h + linear(w, l + ".self_attn.out_proj",
                   attention(linear(w, l + ".self_attn.q_proj", a),
                             linear(w, l + ".self_attn.k_proj", a),
                             linear(w, l + ".self_attn.v_proj", a), p.text_heads, mask));
    a = layer_norm(w, l + ".layer_norm2", h);
    h = h + linear(w, l + ".mlp.fc2", at::gelu(linear(w, l + ".mlp.fc1", a)));
  }
  return layer_norm(w, "text_model.final_layer_norm", h);
}

Tensor unet_forward(const Weights& w, const Preset& p, const Tensor& x, const Tensor& t,
                    const Tensor& context) {
  const std::string m = "diffusion_model.";
  const int c = p.unet_channels;
  Tensor temb = timestep_embedding(t, c);
  temb = linear(w, m + "time_embed.2", at::silu(linear(w, m + "time_embed.0", temb)));
  Tensor h = conv(w, m + "conv_in", x);
  const int levels = static_cast<int>(p.unet_mult.size());
  std::vector<Tensor> skips;
  for (int i = 0; i < levels; ++i) {
    const std::string n = m + "down." + std::to_string(i);
    h = res_block(w, n + ".res", h, temb);
    h = spatial_transformer(w, n + ".attn", h, context, p.unet_heads);
    skips.push_back(h);
    if (i + 1 < levels) h = conv(w, n + ".downsample", h, 2);
  }
  h = res_block(w, m + "mid.res1", h, temb);
  h = spatial_transformer(w, m + "mid.attn", h, context, p.unet_heads);
  h = res_block(w, m + "mid.res2", h, temb);
  for (int i = levels - 1; i >= 0; --i) {
    const std::string n = m + "up." + std::to_string(i);
    h = res_block(w, n + ".res", at::cat({h, skips[static_cast<std::size_t>(i)]}, 1), temb);
    h = spatial_transformer(w, n + ".attn", h, context, p.unet_heads);
    if (i > 0) h = conv(w, n + ".upsample", upsample2x(h));
  }
  return conv(w, m + "out.conv", at::silu(group_norm(w, m + "out.norm", h)));
}

Tensor dit_forward(const Weights& w, const Preset& p, const Tensor& x, const Tensor& cond,
                   const Tensor& t, const Tensor& context) {
  const std::string m = "diffusion_model.";
  const std::int64_t b = x.size(0), zc = x.size(1), tt = x.size(2), hh = x.size(3), ww = x.size(4);
  const std::int64_t d = p.dit_width;
  // Patchify (1,2,2): (B, 2zc, T, h, w) -> (B, T*(h/2)*(w/2), 2zc*4).
  Tensor in = at::cat({x, cond}, 1)
                  .view({b, 2 * zc, tt, hh / 2, 2, ww / 2, 2})
                  .permute({0, 2, 3, 5, 1, 4, 6})
                  .reshape({b, tt * (hh / 2) * (ww / 2), 2 * zc * 4});
  Tensor h = linear(w, m + "patch_embedding", in);
  h = h + timestep_embedding(at::arange(h.size(1), h.options()), d).unsqueeze(0);
  Tensor temb = timestep_embedding(t, d);
  temb = linear(w, m + "time_embedding.2", at::silu(linear(w, m + "time_embedding.0", temb)));
  Tensor ctx =
      linear(w, m + "text_embedding.2", at::gelu(linear(w, m + "text_embedding.0", context)));
  for (int i = 0; i < p.dit_layers; ++i) {
    const std::string n = m + "blocks." + std::to_string(i);
    std::vector<Tensor> mod =
        linear(w, n + ".modulation", at::silu(temb)).unsqueeze(1).chunk(6, -1);
    Tensor a = layer_norm(w, n + ".norm1", h) * (1 + mod[1]) + mod[0];
    h = h + mod[2] *
                linear(w, n + ".self_attn.o",
                       attention(linear(w, n + ".self_attn.q", a), linear(w, n + ".self_attn.k", a),
                                 linear(w, n + ".self_attn.v", a), p.dit_heads));
    a = layer_norm(w, n + ".norm2", h);
    h = h + linear(w, n + ".cross_attn.o",
                   attention(linear(w, n + ".cross_attn.q", a), linear(w, n + ".cross_attn.k", ctx),
                             linear(w, n + ".cross_attn.v", ctx), p.dit_heads));
    a = layer_norm(w, n + ".norm3", h) * (1 + mod[4]) + mod[3];
    h = h + mod[5] * linear(w, n + ".ffn.2", at::gelu(linear(w, n + ".ffn.0", a)));
  }
  std::vector<Tensor> mod =
      linear(w, m + "head.modulation", at::silu(temb)).unsqueeze(1).chunk(2, -1);
  h = linear(w, m + "head.head", layer_norm(w, m + "head.norm", h) * (1 + mod[1]) + mod[0]);
  // Unpatchify: (B, T*(h/2)*(w/2), zc*4) -> (B, zc, T, h, w).
  return h.view({b, tt, hh / 2, ww / 2, zc, 2, 2})
      .permute({0, 4, 1, 2, 5, 3, 6})
      .reshape({b, zc, tt, hh, ww});
}

Tensor vae_encode_spatial(const Weights& w, const Preset& p, const Tensor& pixels, bool video) {
  (void)p;
  (void)video;
  Tensor h = conv(w, "encoder.conv_in", pixels);
  for (int i = 0; i < 3; ++i) {
    const std::string n = "encoder.down." + std::to_string(i);
    h = res_block(w, n + ".res", h);
    h = conv(w, n + ".downsample", h, 2);
  }
  h = res_block(w, "encoder.mid.res", h);
  return conv(w, "encoder.conv_out", at::silu(group_norm(w, "encoder.norm_out", h)));
}

Tensor vae_encode_temporal(const Weights& w, const Tensor& moments) {
  const std::int64_t f = moments.size(2);
  if ((f - 1) % 4 != 0) {
    throw Error("InvalidFrameCount", "video VAE needs 1+4k frames, got " + std::to_string(f));
  }
  // Causal: the first frame alone, then each group of 4 frames becomes one latent frame.
  Tensor first = at::conv3d(moments.narrow(2, 0, 1), weight(w, "encoder.time_first.weight"),
                            weight(w, "encoder.time_first.bias"));
  if (f == 1) return first;
  Tensor rest = at::conv3d(moments.narrow(2, 1, f - 1), weight(w, "encoder.time_down.weight"),
                           weight(w, "encoder.time_down.bias"), {4, 1, 1});
  return at::cat({first, rest}, 2);
}

Tensor vae_decode(const Weights& w, const Preset& p, const Tensor& latent, bool video) {
  (void)p;
  Tensor z = latent;
  std::int64_t b = z.size(0), frames = 1;
  if (video) {
    const std::int64_t t = z.size(2);
    Tensor first = at::conv3d(z.narrow(2, 0, 1), weight(w, "decoder.time_first.weight"),
                              weight(w, "decoder.time_first.bias"));
    if (t > 1) {
      Tensor rest = at::conv_transpose3d(z.narrow(2, 1, t - 1), weight(w, "decoder.time_up.weight"),
                                         weight(w, "decoder.time_up.bias"), {4, 1, 1});
      first = at::cat({first, rest}, 2);
    }
    frames = first.size(2);
    // (B, zc, F, h, w) -> (B*F, zc, h, w)
    z = first.permute({0, 2, 1, 3, 4}).reshape({b * frames, first.size(1), z.size(3), z.size(4)});
  }
  Tensor h = conv(w, "decoder.conv_in", z);
  h = res_block(w, "decoder.mid.res", h);
  for (int i = 2; i >= 0; --i) {
    const std::string n = "decoder.up." + std::to_string(i);
    h = conv(w, n + ".upsample", upsample2x(h));
    h = res_block(w, n + ".res", h);
  }
  h = conv(w, "decoder.conv_out", at::silu(group_norm(w, "decoder.norm_out", h)));
  if (video) {
    h = h.view({b, frames, 3, h.size(2), h.size(3)}).permute({0, 2, 1, 3, 4}).contiguous();
  }
  return h;
}

}  // namespace genscope::detail
