// Compute stages of the reference pipeline: the VAE encode fallback chain, the two
// samplers, and the conversion of decoded pixels to 8-bit frames.
#include "stages.hpp"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <fstream>
#include <string>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

std::string mib(std::int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

std::int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  std::int64_t value = 0;
  std::string unit;
  while (f >> key >> value >> unit) {
    if (key == "MemAvailable:") return value * 1024;
  }
  return -1;
}

// Moments (N, 2zc, h, w) of frames (F,3,H,W) -> scaled latent of the right layout.
at::Tensor finish_latent(const EncodeRequest& r, const at::Tensor& moments) {
  const std::int64_t zc = moments.size(1) / 2;
  if (!r.video) return moments.narrow(1, 0, zc) * kImageLatentScale;
  // (F, 2zc, h, w) -> (1, 2zc, F, h, w) -> causal x4 temporal -> mean half.
  at::Tensor m = moments.permute({1, 0, 2, 3}).unsqueeze(0);
  return vae_encode_temporal(*r.vae, m).narrow(1, 0, zc);
}

at::Tensor encode_tiled(const EncodeRequest& r, std::int64_t tile) {
  const std::int64_t f = r.frames.size(0), h = r.frames.size(2), w = r.frames.size(3);
  at::Tensor out;
  for (std::int64_t i = 0; i < f; ++i) {
    for (std::int64_t y = 0; y < h; y += tile) {
      for (std::int64_t x = 0; x < w; x += tile) {
        at::Tensor part = r.frames.narrow(0, i, 1).narrow(2, y, tile).narrow(3, x, tile);
        at::Tensor m = vae_encode_spatial(*r.vae, *r.preset, part, r.video);
        if (!out.defined()) out = at::empty({f, m.size(1), h / 8, w / 8}, m.options());
        out.narrow(0, i, 1).narrow(2, y / 8, tile / 8).narrow(3, x / 8, tile / 8).copy_(m);
      }
    }
  }
  return out;
}

}  // namespace

std::int64_t estimate_encode_bytes(const Preset& p, std::int64_t frames, std::int64_t h,
                                   std::int64_t w) {
  // The full-resolution stage dominates: input, conv_in output, the residual block's two
  // intermediates and the group-norm temporaries, about 6 live c x H x W float32 maps.
  return 6 * frames * p.vae_channels * h * w * 4 + frames * 3 * h * w * 4;
}

EncodeResult encode_with_fallbacks(const EncodeRequest& r, Step& step) {
  EncodeResult result;
  const std::int64_t f = r.frames.size(0), h = r.frames.size(2), w = r.frames.size(3);
  const std::int64_t direct_bytes = estimate_encode_bytes(*r.preset, f, h, w);
  result.details["budget_bytes"] = r.budget_bytes;
  result.details["direct_estimate_bytes"] = direct_bytes;
  auto refuse = [&](const char* what, std::int64_t need) {
    if (r.budget_bytes > 0 && need > r.budget_bytes) {
      throw Error("OutOfMemoryBudget", std::string(what) + " needs ~" + mib(need) +
                                           " but the memory budget is " + mib(r.budget_bytes));
    }
  };
  auto attempt = [&](const char* strategy, auto&& fn) {
    return step.try_attempt(strategy, [&] {
      try {
        fn();
      } catch (const Error& e) {
        throw std::runtime_error(e.name() + ": " + e.what());
      }
    });
  };

  if (attempt("direct", [&] {
        refuse("direct VAE encode", direct_bytes);
        result.latent = finish_latent(r, vae_encode_spatial(*r.vae, *r.preset, r.frames, r.video));
      })) {
    result.strategy = "direct";
    return result;
  }
  if (attempt("tiled", [&] {
        // Halve the tile until one tile of one frame fits (tiles stay multiples of 8 px).
        std::int64_t tile = std::min(h, w) / 2;
        while (tile % 16 == 0 && estimate_encode_bytes(*r.preset, 1, tile, tile) > r.budget_bytes &&
               r.budget_bytes > 0) {
          tile /= 2;
        }
        if (tile < 8 || tile % 8 != 0 || h % tile != 0 || w % tile != 0) {
          throw Error("TileTooSmall", "no tile size divides " + std::to_string(h) + "x" +
                                          std::to_string(w) + " into 8-pixel multiples");
        }
        const std::int64_t need = estimate_encode_bytes(*r.preset, 1, tile, tile);
        result.details["tile_px"] = tile;
        result.details["tiled_estimate_bytes"] = need;
        refuse("tiled VAE encode", need);
        result.latent = finish_latent(r, encode_tiled(r, tile));
      })) {
    result.strategy = "tiled";
    return result;
  }
  if (attempt("cpu_fallback", [&] {
        if (r.device.is_cpu()) {
          throw Error("NoFallbackDevice",
                      "already computing on the CPU: the CPU fallback is the direct path, "
                      "which the memory budget refuses");
        }
        const std::int64_t avail = mem_available_bytes();
        if (avail >= 0 && direct_bytes > avail) {
          throw Error("OutOfMemoryBudget", "CPU encode needs ~" + mib(direct_bytes) + " but only " +
                                               mib(avail) + " RAM is available");
        }
        Weights cpu;
        for (const auto& [k, t] : *r.vae) cpu.emplace(k, t.cpu());
        EncodeRequest c = r;
        c.vae = &cpu;
        c.frames = r.frames.cpu();
        result.latent =
            finish_latent(c, vae_encode_spatial(cpu, *r.preset, c.frames, r.video)).to(r.device);
      })) {
    result.strategy = "cpu_fallback";
    return result;
  }
  attempt("emergency_zeros", [&] {
    const std::int64_t zc = r.video ? r.preset->video_latent_channels : r.preset->latent_channels;
    result.latent = r.video ? at::zeros({1, zc, 1 + (f - 1) / 4, h / 8, w / 8}, r.frames.options())
                            : at::zeros({1, zc, h / 8, w / 8}, r.frames.options());
  });
  result.strategy = "emergency_zeros";
  return result;
}

at::Tensor synthetic_image(std::int64_t h, std::int64_t w) {
  at::Tensor ys = at::linspace(-1.0, 1.0, h, at::kFloat).view({h, 1}).expand({h, w});
  at::Tensor xs = at::linspace(-1.0, 1.0, w, at::kFloat).view({1, w}).expand({h, w});
  at::Tensor r = at::sqrt(xs * xs + ys * ys);
  return at::stack({xs, ys, at::cos(r * 9.0)}, 0).unsqueeze(0).contiguous();
}

at::Tensor sample_euler_eps(const SampleRequest& r, Step& step) {
  // SD's scaled-linear schedule and the k-diffusion sigma parameterisation.
  at::Tensor betas = at::pow(at::linspace(std::sqrt(0.00085), std::sqrt(0.012), 1000,
                                          at::TensorOptions().dtype(at::kDouble)),
                             2);
  at::Tensor ac = at::cumprod(1.0 - betas, 0);
  at::Tensor log_sigmas = at::log(at::sqrt((1.0 - ac) / ac));
  std::vector<double> ts, sigmas;
  const auto* ls = log_sigmas.data_ptr<double>();
  for (int i = 0; i < r.steps; ++i) {
    const double t = r.steps == 1 ? 999.0 : 999.0 * (1.0 - static_cast<double>(i) / (r.steps - 1));
    const int lo = static_cast<int>(std::floor(t));
    const int hi = std::min(lo + 1, 999);
    const double frac = t - lo;
    ts.push_back(t);
    sigmas.push_back(std::exp(ls[lo] * (1 - frac) + ls[hi] * frac));
  }
  sigmas.push_back(0.0);

  auto gen = at::make_generator<at::CPUGeneratorImpl>(r.seed);
  at::Tensor noise = at::randn(r.init_latent.sizes(), gen, at::kFloat).to(r.device);
  at::Tensor x = r.init_latent + noise * sigmas[0];
  at::Tensor ctx = at::cat({r.negative, r.positive}, 0);
  step.begin_iterations();
  for (int i = 0; i < r.steps; ++i) {
    const double s = sigmas[static_cast<std::size_t>(i)];
    at::Tensor x_in = at::cat({x, x}, 0) / std::sqrt(s * s + 1.0);
    at::Tensor t = at::full({2}, ts[static_cast<std::size_t>(i)], x.options());
    std::vector<at::Tensor> eps = unet_forward(*r.denoiser, *r.preset, x_in, t, ctx).chunk(2, 0);
    at::Tensor e = eps[0] + r.guidance * (eps[1] - eps[0]);
    x = x + e * (sigmas[static_cast<std::size_t>(i) + 1] - s);
    step.mark_iteration();
  }
  return x;
}

at::Tensor sample_flow_euler(const SampleRequest& r, Step& step) {
  constexpr double kShift = 5.0;
  std::vector<double> sigmas;
  for (int i = 0; i <= r.steps; ++i) {
    const double s = 1.0 - static_cast<double>(i) / r.steps;
    sigmas.push_back(kShift * s / (1.0 + (kShift - 1.0) * s));
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(r.seed);
  at::Tensor x = at::randn(r.init_latent.sizes(), gen, at::kFloat).to(r.device);
  at::Tensor ctx = at::cat({r.negative, r.positive}, 0);
  at::Tensor cond = at::cat({r.init_latent, r.init_latent}, 0);
  step.begin_iterations();
  for (int i = 0; i < r.steps; ++i) {
    const double s = sigmas[static_cast<std::size_t>(i)];
    at::Tensor t = at::full({2}, s * 1000.0, x.options());
    std::vector<at::Tensor> v =
        dit_forward(*r.denoiser, *r.preset, at::cat({x, x}, 0), cond, t, ctx).chunk(2, 0);
    x = x + (v[0] + r.guidance * (v[1] - v[0])) * (sigmas[static_cast<std::size_t>(i) + 1] - s);
    step.mark_iteration();
  }
  return x;
}

std::vector<std::vector<std::uint8_t>> to_rgb8_frames(const at::Tensor& pixels) {
  at::Tensor p = pixels.detach().to(at::kCPU, at::kFloat);
  if (p.dim() == 4) p = p.unsqueeze(2);  // (1,3,H,W) -> (1,3,1,H,W)
  at::Tensor u8 = ((p[0] + 1.0) * 127.5)
                      .round()
                      .clamp(0, 255)
                      .to(at::kByte)
                      .permute({1, 2, 3, 0})
                      .contiguous();  // (F,H,W,3)
  std::vector<std::vector<std::uint8_t>> frames;
  const std::int64_t n = u8.size(1) * u8.size(2) * 3;
  for (std::int64_t f = 0; f < u8.size(0); ++f) {
    const auto* d = u8[f].data_ptr<std::uint8_t>();
    frames.emplace_back(d, d + n);
  }
  return frames;
}

}  // namespace genscope::detail
