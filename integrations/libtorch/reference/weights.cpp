// Seeded random weights of the reference components and the kohya-format LoRA.
//
// Init is fan-in scaled normal (std 1/sqrt(fan_in)) so activations stay O(1) through the
// residual stacks; norms start at weight 1, bias 0. Each component draws from its own CPU
// generator seeded from the preset, so the cache files are identical on every machine.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "genscope/error.hpp"
#include "networks.hpp"

namespace genscope::detail {
namespace {

class Builder {
 public:
  explicit Builder(std::uint64_t seed) : gen_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  at::Tensor randn(at::IntArrayRef shape, double std) {
    return at::randn(shape, gen_, at::TensorOptions().dtype(at::kFloat)) * std;
  }
  void linear(const std::string& n, int out, int in, bool bias = true) {
    w_[n + ".weight"] = randn({out, in}, 1.0 / std::sqrt(static_cast<double>(in)));
    if (bias) w_[n + ".bias"] = randn({out}, 0.02);
  }
  void conv(const std::string& n, int out, int in, int k) {
    w_[n + ".weight"] = randn({out, in, k, k}, 1.0 / std::sqrt(static_cast<double>(in * k * k)));
    w_[n + ".bias"] = randn({out}, 0.02);
  }
  void norm(const std::string& n, int ch) {
    w_[n + ".weight"] = at::ones({ch}, at::kFloat);
    w_[n + ".bias"] = at::zeros({ch}, at::kFloat);
  }
  void raw(const std::string& n, at::Tensor t) { w_[n] = std::move(t); }
  // A residual block without (temb_dim = 0) or with a timestep projection.
  void res(const std::string& n, int in, int out, int temb_dim = 0) {
    norm(n + ".norm1", in);
    conv(n + ".conv1", out, in, 3);
    if (temb_dim > 0) linear(n + ".emb", out, temb_dim);
    norm(n + ".norm2", out);
    conv(n + ".conv2", out, out, 3);
    if (in != out) conv(n + ".skip", out, in, 1);
  }
  // A spatial transformer: self-attention, cross-attention to the text, feed-forward.
  void transformer(const std::string& n, int ch, int context_dim) {
    norm(n + ".norm", ch);
    linear(n + ".proj_in", ch, ch);
    norm(n + ".ln1", ch);
    for (const char* p : {"to_q", "to_k", "to_v"}) linear(n + ".attn1." + p, ch, ch, false);
    linear(n + ".attn1.to_out.0", ch, ch);
    norm(n + ".ln2", ch);
    linear(n + ".attn2.to_q", ch, ch, false);
    linear(n + ".attn2.to_k", ch, context_dim, false);
    linear(n + ".attn2.to_v", ch, context_dim, false);
    linear(n + ".attn2.to_out.0", ch, ch);
    norm(n + ".ln3", ch);
    linear(n + ".ff.0", 4 * ch, ch);
    linear(n + ".ff.2", ch, 4 * ch);
    linear(n + ".proj_out", ch, ch);
  }
  Weights take() { return std::move(w_); }

 private:
  at::Generator gen_;
  Weights w_;
};

void vae_weights(Builder& b, const Preset& p, int zc, bool video) {
  const int c = p.vae_channels;
  b.conv("encoder.conv_in", c, 3, 3);
  const int in_ch[3] = {c, c, 2 * c};
  const int out_ch[3] = {c, 2 * c, 2 * c};
  for (int i = 0; i < 3; ++i) {
    const std::string n = "encoder.down." + std::to_string(i);
    b.res(n + ".res", in_ch[i], out_ch[i]);
    b.conv(n + ".downsample", out_ch[i], out_ch[i], 3);
  }
  b.res("encoder.mid.res", 2 * c, 2 * c);
  b.norm("encoder.norm_out", 2 * c);
  b.conv("encoder.conv_out", 2 * zc, 2 * c, 3);
  b.conv("decoder.conv_in", 2 * c, zc, 3);
  b.res("decoder.mid.res", 2 * c, 2 * c);
  for (int i = 2; i >= 0; --i) {
    const std::string n = "decoder.up." + std::to_string(i);
    b.conv(n + ".upsample", out_ch[i], out_ch[i], 3);
    b.res(n + ".res", out_ch[i], in_ch[i]);
  }
  b.norm("decoder.norm_out", c);
  b.conv("decoder.conv_out", 3, c, 3);
  if (video) {
    const double s = 1.0 / std::sqrt(2.0 * zc);
    b.raw("encoder.time_first.weight", b.randn({2 * zc, 2 * zc, 1, 1, 1}, s));
    b.raw("encoder.time_first.bias", b.randn({2 * zc}, 0.02));
    b.raw("encoder.time_down.weight", b.randn({2 * zc, 2 * zc, 4, 1, 1}, s / 2.0));
    b.raw("encoder.time_down.bias", b.randn({2 * zc}, 0.02));
    const double d = 1.0 / std::sqrt(static_cast<double>(zc));
    b.raw("decoder.time_first.weight", b.randn({zc, zc, 1, 1, 1}, d));
    b.raw("decoder.time_first.bias", b.randn({zc}, 0.02));
    b.raw("decoder.time_up.weight", b.randn({zc, zc, 4, 1, 1}, d));  // (in, out, kT, 1, 1)
    b.raw("decoder.time_up.bias", b.randn({zc}, 0.02));
  }
}

}  // namespace

const at::Tensor& weight(const Weights& w, const std::string& name) {
  auto it = w.find(name);
  if (it == w.end()) throw Error("MissingWeight", "component has no weight '" + name + "'");
  return it->second;
}

Weights make_text_encoder_weights(const Preset& p, std::uint64_t seed) {
  Builder b(seed);
  const int d = p.text_width;
  b.raw("text_model.embeddings.token_embedding.weight", b.randn({258, d}, 1.0));
  b.raw("text_model.embeddings.position_embedding.weight", b.randn({p.context_tokens, d}, 0.2));
  for (int i = 0; i < p.text_layers; ++i) {
    const std::string n = "text_model.encoder.layers." + std::to_string(i);
    b.norm(n + ".layer_norm1", d);
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"})
      b.linear(n + ".self_attn." + proj, d, d);
    b.norm(n + ".layer_norm2", d);
    b.linear(n + ".mlp.fc1", 4 * d, d);
    b.linear(n + ".mlp.fc2", d, 4 * d);
  }
  b.norm("text_model.final_layer_norm", d);
  return b.take();
}

Weights make_unet_weights(const Preset& p, std::uint64_t seed) {
  Builder b(seed);
  const std::string m = "diffusion_model.";
  const int c = p.unet_channels;
  const int temb = 4 * c;
  b.linear(m + "time_embed.0", temb, c);
  b.linear(m + "time_embed.2", temb, temb);
  b.conv(m + "conv_in", c, p.latent_channels, 3);
  const int levels = static_cast<int>(p.unet_mult.size());
  int cur = c;
  for (int i = 0; i < levels; ++i) {
    const int ch = c * p.unet_mult[i];
    const std::string n = m + "down." + std::to_string(i);
    b.res(n + ".res", cur, ch, temb);
    b.transformer(n + ".attn", ch, p.text_width);
    if (i + 1 < levels) b.conv(n + ".downsample", ch, ch, 3);
    cur = ch;
  }
  b.res(m + "mid.res1", cur, cur, temb);
  b.transformer(m + "mid.attn", cur, p.text_width);
  b.res(m + "mid.res2", cur, cur, temb);
  for (int i = levels - 1; i >= 0; --i) {
    const int ch = c * p.unet_mult[i];
    const std::string n = m + "up." + std::to_string(i);
    b.res(n + ".res", cur + ch, ch, temb);
    b.transformer(n + ".attn", ch, p.text_width);
    if (i > 0) b.conv(n + ".upsample", ch, ch, 3);
    cur = ch;
  }
  b.norm(m + "out.norm", c);
  b.conv(m + "out.conv", p.latent_channels, c, 3);
  return b.take();
}

Weights make_image_vae_weights(const Preset& p, std::uint64_t seed) {
  Builder b(seed);
  vae_weights(b, p, p.latent_channels, false);
  return b.take();
}

Weights make_video_vae_weights(const Preset& p, std::uint64_t seed) {
  Builder b(seed);
  vae_weights(b, p, p.video_latent_channels, true);
  return b.take();
}

Weights make_dit_weights(const Preset& p, std::uint64_t seed) {
  Builder b(seed);
  const std::string m = "diffusion_model.";
  const int d = p.dit_width;
  const int patch_in = 2 * p.video_latent_channels * 4;  // noisy + image latent, 1x2x2 patch
  b.linear(m + "patch_embedding", d, patch_in);
  b.linear(m + "time_embedding.0", d, d);
  b.linear(m + "time_embedding.2", d, d);
  b.linear(m + "text_embedding.0", d, p.text_width);
  b.linear(m + "text_embedding.2", d, d);
  for (int i = 0; i < p.dit_layers; ++i) {
    const std::string n = m + "blocks." + std::to_string(i);
    b.linear(n + ".modulation", 6 * d, d);
    b.norm(n + ".norm1", d);
    for (const char* q : {"q", "k", "v", "o"}) b.linear(n + ".self_attn." + q, d, d);
    b.norm(n + ".norm2", d);
    for (const char* q : {"q", "k", "v", "o"}) b.linear(n + ".cross_attn." + q, d, d);
    b.norm(n + ".norm3", d);
    b.linear(n + ".ffn.0", 4 * d, d);
    b.linear(n + ".ffn.2", d, 4 * d);
  }
  b.linear(m + "head.modulation", 2 * d, d);
  b.norm(m + "head.norm", d);
  b.linear(m + "head.head", p.video_latent_channels * 4, d);
  return b.take();
}

bool is_lora_target(const std::string& key) {
  if (key.size() < 7 || key.compare(key.size() - 7, 7, ".weight") != 0) return false;
  for (const char* part : {".attn1.to_", ".attn2.to_", ".self_attn.", ".cross_attn."}) {
    if (key.find(part) != std::string::npos) return true;
  }
  return false;
}

std::string kohya_module_name(const std::string& key) {
  std::string k = key;
  const std::string prefix = "diffusion_model.";
  if (k.rfind(prefix, 0) == 0) k = k.substr(prefix.size());
  if (k.size() > 7 && k.compare(k.size() - 7, 7, ".weight") == 0) k.resize(k.size() - 7);
  for (char& ch : k) {
    if (ch == '.') ch = '_';
  }
  return "lora_unet_" + k;
}

Weights make_lora_weights(const Preset& p, const Weights& denoiser, std::uint64_t seed) {
  Builder b(seed);
  const int r = p.lora_rank;
  for (const auto& [key, w] : denoiser) {
    if (!is_lora_target(key) || w.dim() != 2) continue;
    const std::string mod = kohya_module_name(key);
    const int out = static_cast<int>(w.size(0));
    const int in = static_cast<int>(w.size(1));
    b.raw(mod + ".lora_down.weight", b.randn({r, in}, 1.0 / std::sqrt(static_cast<double>(in))));
    b.raw(mod + ".lora_up.weight", b.randn({out, r}, 0.5 / std::sqrt(static_cast<double>(r))));
    b.raw(mod + ".alpha", at::full({}, p.lora_alpha, at::kFloat));
  }
  return b.take();
}

}  // namespace genscope::detail
