// The reference pipeline's monitoring glue: every phase is a genscope step carrying the
// seeds' analyses (000 text encoding, 001 latent generation, 002 LoRA application,
// 003 model loading and usage statistics). The compute lives in stages.cpp/networks.cpp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <optional>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "analysis.hpp"
#include "component_store.hpp"
#include "genscope/error.hpp"
#include "genscope/lora.hpp"
#include "genscope/lora_report.hpp"
#include "genscope/reference_pipeline.hpp"
#include "genscope/text_analysis.hpp"
#include "genscope/torch.hpp"
#include "image_io.hpp"
#include "patcher.hpp"
#include "stages.hpp"

namespace genscope {
namespace detail {

bool torch_cuda_available() { return at::hasCUDA(); }

namespace {

class ReferencePipeline {
 public:
  ReferencePipeline(const DemoOptions& o, ActiveRun& run, DemoResult& result)
      : o_(o),
        p_(find_preset(o.preset)),
        run_(run),
        result_(result),
        device_(o.device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU)),
        video_(o.mode == "i2v"),
        steps_(o.steps > 0 ? o.steps : p_.default_steps) {}

  void run_all() {
    load_models();
    apply_lora();
    encode_text();
    generate_latents();
    sample();
    decode();
    save();
  }

 private:
  template <class F>
  void phase(StepKind kind, const std::string& name, F&& fn) {
    run_.run_step(kind, name, std::forward<F>(fn));
  }

  LoadedComponent load_one(const std::string& name, const std::function<Weights()>& make) {
    LoadedComponent c;
    phase(StepKind::kModelLoading, "load " + name, [&](Step& s) {
      c = load_component(reference_cache_dir(o_), name, p_, make);
      for (auto& [k, t] : c.weights) t = t.to(device_);
      s.add_counter("bytes", static_cast<double>(c.file_size_bytes));
      s.add_counter("parameters", static_cast<double>(c.parameters));
      s.add_counter("tensors", static_cast<double>(c.tensors));
      if (s.active()) {
        s.label("file", c.file.string());
        s.attach({"model_component",
                  name,
                  {{"component", name},
                   {"file", c.file.string()},
                   {"file_size_bytes", c.file_size_bytes},
                   {"tensors", c.tensors},
                   {"parameters", c.parameters},
                   {"dtype", "F32"},
                   {"device", device_.str()},
                   {"generated", c.generated},
                   {"generate_ns", c.generate_ns},
                   {"read_ns", c.read_ns}}});
      }
    });
    return c;
  }

  void load_models() {
    phase(StepKind::kModelLoading, "model_loading", [&](Step& s) {
      const std::uint64_t seed = p_.weight_seed;
      LoadedComponent te =
          load_one("text_encoder", [&] { return make_text_encoder_weights(p_, seed + 1); });
      LoadedComponent dn = video_
                               ? load_one("dit", [&] { return make_dit_weights(p_, seed + 2); })
                               : load_one("unet", [&] { return make_unet_weights(p_, seed + 2); });
      LoadedComponent vae =
          video_ ? load_one("video_vae", [&] { return make_video_vae_weights(p_, seed + 3); })
                 : load_one("vae", [&] { return make_image_vae_weights(p_, seed + 3); });
      s.add_counter("components", 3);
      s.add_counter("bytes", static_cast<double>(te.file_size_bytes + dn.file_size_bytes +
                                                 vae.file_size_bytes));
      s.add_counter("parameters",
                    static_cast<double>(te.parameters + dn.parameters + vae.parameters));
      text_ = std::make_shared<Weights>(std::move(te.weights));
      denoiser_ = std::make_shared<Weights>(std::move(dn.weights));
      vae_ = std::move(vae.weights);
      denoiser_file_ = dn.file;
      // ComfyUI: one ModelPatcher per model; LoRAs are patches on a clone of it.
      clip_patcher_.emplace(snapshot_weights(*text_, "ReferenceTextEncoder", false));
      unet_patcher_.emplace(snapshot_weights(*denoiser_, video_ ? "ReferenceDiT" : "ReferenceUNet", false));
      for (ModelPatcher* m : {&*clip_patcher_, &*unet_patcher_}) m->set_devices(device_.str(), device_.str(), "cpu");
    });
  }

  // ComfyUI's LoraLoader, through genscope's ModelPatcher: fit the LoRA file to the
  // denoiser's file (ComfyUI's key map), clone the patcher, add the patches (UUID renewed),
  // then merge them when the model is loaded for sampling (patch_model). The seed-002 report
  // is genscope's lora_application_report over snapshots taken before and after.
  void apply_lora() {
    phase(StepKind::kLoraApplication, "lora_application", [&](Step& s) {
      const std::string name = video_ ? "lora_dit" : "lora_unet";
      LoraApplicationObservation obs;
      obs.lora_path = reference_cache_dir(o_) / (name + ".safetensors");
      const std::string unet_class = video_ ? "ReferenceDiT" : "ReferenceUNet";
      if (s.active()) {
        obs.baseline_unix_seconds =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        obs.unet_before = unet_patcher_->snapshot();
        obs.unet_before.parameters = snapshot_weights(*denoiser_, unet_class, true).parameters;
        obs.clip_before = clip_patcher_->snapshot();
      }
      const Weights& base = *denoiser_;
      const LoadedComponent lora = load_component(reference_cache_dir(o_), name, p_, [&] {
        return make_lora_weights(p_, base, p_.weight_seed + 10);
      });
      const std::shared_ptr<const LoraFile> lora_file = LoraFile::open(lora.file);
      const LoraFit fit = fit_lora(*lora_file, SafetensorsFile::open(denoiser_file_));
      ModelPatcher patched = unet_patcher_->clone();
      patched.add_patches(lora_file, fit, o_.lora_strength);
      const std::vector<std::string> keys = patch_model(patched, *denoiser_);
      s.add_counter("patched_keys", static_cast<double>(keys.size()));
      s.add_counter("bytes", static_cast<double>(lora.file_size_bytes));
      if (s.active()) {
        obs.unet_after = patched.snapshot();
        obs.unet_after.parameters = snapshot_weights(*denoiser_, unet_class, true).parameters;
        obs.clip_after = clip_patcher_->snapshot();
        obs.unet_patcher = &patched;
        obs.clip_patcher = &*clip_patcher_;
        obs.fit = fit;
        obs.success = true;
        obs.models_returned = 2;
        s.attach(lora_application_attachment(obs));
      }
      unet_patcher_.emplace(std::move(patched));
    });
  }

  void encode_text() {
    phase(StepKind::kTextEncoding, "text_encoding", [&](Step& s) {
      double characters = 0, tokens_total = 0;
      for (const char* role : {"positive", "negative"}) {
        const std::string& text = std::string(role) == "positive" ? o_.prompt : o_.negative;
        phase(StepKind::kTextEncoding, std::string("encode ") + role, [&](Step& e) {
          const std::int64_t t0 = Step::now_ns();
          int tokens = 0;
          bool truncated = false;
          at::Tensor ids = tokenize(text, p_, tokens, truncated).to(device_);
          at::Tensor ctx = text_encoder_forward(*text_, p_, ids);
          e.add_counter("characters", static_cast<double>(text.size()));
          e.add_counter("tokens", tokens);
          e.add_counter("prompts", 1);
          characters += static_cast<double>(text.size());
          tokens_total += tokens;
          if (e.active()) {
            TextOptions to;
            to.tokens = tokens;
            to.duration_ns = Step::now_ns() - t0;
            nlohmann::json text_json = text_analysis_json(analyze_text(text, to));
            text_json["truncated"] = truncated;
            text_json["context_tokens"] = p_.context_tokens;
            e.attach({"text", std::string(role) + " prompt", std::move(text_json)});
            AnalysisOptions ao;
            if (!video_ && p_.text_width == 768) ao.declared_family = ModelFamily::kSD1;
            ao.expected_device = device_.str();
            ao.expected_dtype = DType::kF32;
            nlohmann::json a = tensor_analysis(ctx, TensorRole::kConditioning, ao);
            if (o_.write_dumps) {
              const auto path = dumps_dir() / ("conditioning_" + std::string(role) + ".npy");
              dump_npy(path.string(), ctx);
              a["dump"] = path.string();
            }
            e.attach({"tensor", std::string(role) + " conditioning", std::move(a)});
          }
          (std::string(role) == "positive" ? positive_ : negative_) = ctx;
        });
      }
      s.add_counter("characters", characters);
      s.add_counter("tokens", tokens_total);
      s.add_counter("prompts", 2);
      if (s.active()) {
        s.attach(
            {"model_state",
             "models",
             {{"clip", patcher_state(*clip_patcher_)}, {"unet", patcher_state(*unet_patcher_)}}});
      }
    });
  }

  void generate_latents() {
    phase(StepKind::kLatentGeneration, "latent_generation", [&](Step& s) {
      const std::int64_t size = video_ ? p_.video_size : p_.image_size;
      const std::int64_t frames = video_ ? p_.video_frames : 1;
      at::Tensor first = synthetic_image(size, size);
      at::Tensor pixels =
          video_ ? at::cat({first, at::zeros({frames - 1, 3, size, size})}, 0) : first;
      EncodeRequest req;
      req.vae = &vae_;
      req.preset = &p_;
      req.frames = pixels.to(device_);
      req.video = video_;
      req.budget_bytes = o_.memory_budget_bytes;
      req.device = device_;
      EncodeResult er = encode_with_fallbacks(req, s);
      init_latent_ = er.latent;
      result_.encode_strategy = er.strategy;
      s.add_counter("frames", static_cast<double>(frames));
      s.add_counter("bytes", static_cast<double>(pixels.numel() * 4));
      s.add_counter("pixels", static_cast<double>(frames * size * size));
      s.label("strategy", er.strategy);
      if (s.active()) {
        nlohmann::json a = latent_analysis(er.latent, size, size, frames);
        a["strategy"] = er.strategy;
        a["encode"] = er.details;
        a["input"] = {{"frames", frames},
                      {"height", size},
                      {"width", size},
                      {"channels", 3},
                      {"bytes", pixels.numel() * 4}};
        if (er.strategy == "emergency_zeros") {
          a["warning"] = "every strategy failed: zero latents carry no image information";
        }
        if (o_.write_dumps) {
          const auto path = dumps_dir() / "latent_init.npy";
          dump_npy(path.string(), er.latent);
          a["dump"] = path.string();
        }
        s.attach({"latent", "initial latent", std::move(a)});
      }
    });
  }

  void sample() {
    phase(StepKind::kSampling, "sampling", [&](Step& s) {
      SampleRequest r;
      r.denoiser = denoiser_.get();
      r.preset = &p_;
      r.positive = positive_;
      r.negative = negative_;
      r.init_latent = init_latent_;
      r.steps = steps_;
      r.guidance = o_.guidance;
      r.seed = o_.seed;
      r.device = device_;
      latent_ = video_ ? sample_flow_euler(r, s) : sample_euler_eps(r, s);
      result_.latent_shape.assign(latent_.sizes().begin(), latent_.sizes().end());
      s.add_counter("iterations", steps_);
      s.add_counter("model_evaluations", 2.0 * steps_);
      s.label("sampler", video_ ? "flow_match_euler (shift 5)" : "euler (epsilon, scaled-linear)");
      if (s.active()) {
        s.attach({"tensor", "sampled latent", tensor_analysis(latent_, TensorRole::kLatent)});
      }
    });
  }

  void decode() {
    phase(StepKind::kVaeDecode, "vae_decode", [&](Step& s) {
      pixels_ = vae_decode(vae_, p_, video_ ? latent_ : latent_ / kImageLatentScale, video_);
      const std::int64_t frames = video_ ? pixels_.size(2) : 1;
      s.add_counter("frames", static_cast<double>(frames));
      s.add_counter("pixels", static_cast<double>(frames * pixels_.size(-1) * pixels_.size(-2)));
      if (s.active()) {
        s.attach({"tensor", "decoded pixels", tensor_analysis(pixels_, TensorRole::kImage)});
      }
    });
  }

  void save() {
    phase(StepKind::kSave, "save", [&](Step& s) {
      const auto frames = to_rgb8_frames(pixels_);
      const int h = static_cast<int>(pixels_.size(-2)), w = static_cast<int>(pixels_.size(-1));
      XXH3_state_t* state = XXH3_createState();
      XXH3_64bits_reset(state);
      double bytes = 0;
      nlohmann::json files = nlohmann::json::array();
      for (std::size_t i = 0; i < frames.size(); ++i) {
        char name[32];
        if (video_)
          std::snprintf(name, sizeof name, "frame_%03zu.png", i);
        else
          std::snprintf(name, sizeof name, "image.png");
        const std::vector<std::uint8_t> png = encode_png_rgb8(frames[i], w, h);
        const std::filesystem::path path = o_.out_dir / name;
        write_bytes(path, png);
        XXH3_64bits_update(state, png.data(), png.size());
        bytes += static_cast<double>(png.size());
        result_.images.push_back(path);
        files.push_back({{"path", path.string()}, {"bytes", png.size()}});
      }
      char hex[17];
      std::snprintf(hex, sizeof hex, "%016llx",
                    static_cast<unsigned long long>(XXH3_64bits_digest(state)));
      XXH3_freeState(state);
      result_.output_hash = hex;
      s.add_counter("files", static_cast<double>(frames.size()));
      s.add_counter("bytes", bytes);
      s.add_counter("frames", static_cast<double>(frames.size()));
      if (s.active()) {
        s.attach(
            {"outputs",
             "images",
             {{"files", files}, {"xxh3_64", result_.output_hash}, {"width", w}, {"height", h}}});
      }
    });
  }

  std::filesystem::path dumps_dir() {
    const std::filesystem::path d = o_.out_dir / "dumps";
    std::filesystem::create_directories(d);
    return d;
  }

  const DemoOptions& o_;
  const Preset& p_;
  ActiveRun& run_;
  DemoResult& result_;
  at::Device device_;
  bool video_;
  int steps_;
  std::shared_ptr<Weights> text_, denoiser_;
  std::filesystem::path denoiser_file_;
  Weights vae_;
  std::optional<ModelPatcher> clip_patcher_, unet_patcher_;
  at::Tensor positive_, negative_, init_latent_, latent_, pixels_;
};

}  // namespace
}  // namespace detail

int add_reference_probes(Monitor& monitor, const DemoOptions& options) {
  return options.device == "cuda" ? add_torch_allocator_probes(monitor) : 0;
}

nlohmann::json usage_statistics(const Run& run, const DemoOptions& o, std::size_t generated);

DemoResult run_reference_pipeline(const DemoOptions& options, Monitor& monitor) {
  validate_demo_options(options);
  const detail::Preset& p = detail::find_preset(options.preset);
  at::set_num_threads(options.threads);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
  const bool video = options.mode == "i2v";
  const int steps = options.steps > 0 ? options.steps : p.default_steps;
  const int size = video ? p.video_size : p.image_size;

  RunOptions ro;
  ro.pipeline.name = video ? "genscope reference i2v" : "genscope reference t2i";
  ro.pipeline.model = "reference-" + p.name;
  ro.pipeline.architecture = video ? "video DiT" : "UNet";
  ro.pipeline.parameters = {{"mode", options.mode},
                            {"preset", p.name},
                            {"resolution", std::to_string(size) + "x" + std::to_string(size)},
                            {"steps", std::to_string(steps)},
                            {"seed", std::to_string(options.seed)},
                            {"batch", "1"},
                            {"frames", std::to_string(video ? p.video_frames : 1)},
                            {"guidance", std::to_string(options.guidance)},
                            {"lora_strength", std::to_string(options.lora_strength)},
                            {"memory_budget_bytes", std::to_string(options.memory_budget_bytes)},
                            {"device", options.device},
                            {"threads", std::to_string(options.threads)}};

  DemoResult result;
  ActiveRun run = monitor.start_run(ro);
  const std::int64_t t0 = Step::now_ns();
  try {
    detail::ReferencePipeline pipeline(options, run, result);
    pipeline.run_all();
  } catch (const Error& e) {
    result.error = e.name() + ": " + e.what();
  } catch (const std::exception& e) {
    result.error = std::string("PipelineFailed: ") + e.what();
  }
  if (run.active()) {
    const Run snapshot = run.snapshot();
    nlohmann::json usage = usage_statistics(snapshot, options, result.images.empty() ? 0 : 1);
    usage["wall_ns"] = Step::now_ns() - t0;
    // The cross-generation summary (seed 003) is the monitor's own "usage" attachment, added
    // by finish(); this one adds the per-component memory of this pipeline.
    run.attach({"usage_statistics", "usage statistics", std::move(usage)});
  }
  result.run = run.finish();
  return result;
}

}  // namespace genscope
