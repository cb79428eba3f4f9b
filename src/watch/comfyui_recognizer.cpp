// ComfyUI's log lines as runs and steps.
//
// ComfyUI logs bare messages ("%(message)s", app/logger.py `setup_logger`) on stderr (stdout
// with --log-stdout); launchers and forks add prefixes, so every line is matched by substring.
// Sources (comfyanonymous/ComfyUI; the code index gives no line numbers, so functions and the
// commit read are named):
//   got prompt                      server.py `post_prompt`: logging.info("got prompt")
//   invalid prompt: {...}           server.py `post_prompt`: the prompt is rejected, never runs
//   Prompt executed in {:.2f} seconds | in HH:MM:SS (over 600 s)
//                                   main.py `prompt_worker` (002f2bed), after every prompt
//   Requested to load {class}       comfy/model_management.py `load_models_gpu` (00184d15), once
//                                   per model not yet loaded, all before the first load
//   loaded completely; {} MB usable, {} MB loaded, full load: {}
//   loaded partially; {} MB usable, {} MB loaded, {} MB offloaded, {} MB buffer reserved,
//     lowvram patches: {}          comfy/model_patcher.py `ModelPatcher.load` (current)
//   loaded completely {usable} {loaded} {full_load} | loaded partially {usable} {loaded}
//     {patches} | loaded in lowvram mode {usable}   the same function, 2023-2024 builds
//   lora key not loaded: {key}      comfy/lora.py `load_lora`, one per unmatched key
//   Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE decoding.
//                                   comfy/sd.py `VAE.decode` (`VAE.encode`: "encoding")
//   !!! Exception during processing !!! {ex}        execution.py `execute` (2023-2024)
//   An error occurred while executing a workflow    execution.py `execute` (current), then
//                                   the traceback, whose last line is "Type: message"
//   Got an OOM, unloading all loaded models.        execution.py `execute` on an OOM
//   CUDA out of memory. Tried to allocate {size}    PyTorch c10/cuda/CUDACachingAllocator.cpp
//
//   model weight dtype {}, manual cast: {}   comfy/sd.py `load_state_dict_guess_config`
//   model_type {}                    comfy/model_base.py `BaseModel.__init__`
//   Using {} attention in VAE        comfy/ldm/modules/diffusionmodules/model.py (v0.3.18)
//   VAE load device: {}, offload device: {}, dtype: {}         comfy/sd.py `VAE.__init__`
//   CLIP/text encoder model load device: {}, offload device: {}, current: {}, dtype: {}
//                                   comfy/sd.py `CLIP.__init__`, the checkpoint loader's last
//                                   line (v0.3.18 order: model, VAE, CLIP)
//
// One run per prompt (a prompt queued while another runs starts when that one's "Prompt
// executed" line comes, as ComfyUI's PromptQueue runs them one at a time). The checkpoint load
// is a model_loading step "load checkpoint" from "model weight dtype" to the CLIP line (or,
// without it, to the next phase: closed_by inferred). "Requested to load X" ... "loaded ..."
// is a device move, "move X to device" (label operation=device_move, counters usable_bytes
// and moved_bytes): the weights were read from the file before, by the checkpoint load. The
// LoRA warnings are one lora_application step (spanning the warnings only) with the keys
// attached. Phases that print nothing are inferred from the gaps (StepRecord::inferred):
// "text encoding" from the end of a text encoder's load or move to the next diffusion model
// move or sampler bar, and "vae decode and save" from the end of the last step after sampling
// to the prompt's end. A tiled VAE retry line opens a VAE step with the two attempts. A
// failure marks the innermost open step failed with the exception's message (the traceback's
// last line when it comes) and ends it.
#include "watch/comfyui_recognizer.hpp"

#include <cctype>

#include "watch/text_scan.hpp"

namespace genscope::watch {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;  // ComfyUI's "MB" is bytes / (1024 * 1024)
constexpr std::size_t kMaxLoraKeys = 1000;

bool is_vae_class(std::string_view c) {
  return contains(c, "VAE") || contains(c, "Autoencoder") || contains(c, "Vae");
}

bool is_text_encoder_class(std::string_view c) {
  for (const char* w : {"Clip", "CLIP", "TEModel", "T5", "TextEncoder", "Gemma", "Llama", "Qwen", "Umt5"}) {
    if (contains(c, w)) return true;
  }
  return false;
}

// "torch.OutOfMemoryError: CUDA out of memory. ..." -> type and message of a traceback's last line.
bool exception_line(std::string_view line, std::string_view* type, std::string_view* message) {
  std::size_t i = 0;
  while (i < line.size() && (std::isalnum(static_cast<unsigned char>(line[i])) || line[i] == '_' || line[i] == '.')) ++i;
  if (i == 0 || i + 1 >= line.size() || line[i] != ':' || line[i + 1] != ' ') return false;
  const std::string_view t = line.substr(0, i);
  const bool named = (t.size() >= 5 && t.substr(t.size() - 5) == "Error") ||
                     (t.size() >= 9 && t.substr(t.size() - 9) == "Exception") ||
                     (t.size() >= 9 && t.substr(t.size() - 9) == "Interrupt");
  if (!named || std::isdigit(static_cast<unsigned char>(t[0]))) return false;
  *type = t;
  *message = line.substr(i + 2);
  return true;
}

}  // namespace

std::vector<std::string> ComfyUIRecognizer::anchors() const {
  return {"got prompt", "invalid prompt:", "Prompt executed in ", "Requested to load ",
          "model weight dtype ", "model_type ", "attention in VAE", "VAE load device: ",
          "CLIP/text encoder model load device: ", "no CLIP/text encoder weights", "%|",
          "loaded completely", "loaded partially", "loaded in lowvram mode", "lora key not loaded",
          "Exception during processing", "An error occurred while executing a workflow",
          "Got an OOM", "out of memory. Tried to allocate", "Ran out of memory when regular"};
}

void ComfyUIRecognizer::begin_prompt(StepApplier& applier, std::int64_t ts) {
  ++prompts_;
  in_prompt_ = true;
  prompt_failed_ = false;
  load_token_ = 0;
  load_queue_.clear();
  vae_token_ = 0;
  ckpt_token_ = 0;
  encoder_ready_ = false;
  prompt_start_ns_ = ts;
  RunAnnouncement a;
  a.name = "prompt " + std::to_string(prompts_);
  a.announced_by = "comfyui";
  a.labels["comfyui.prompt"] = std::to_string(prompts_);
  applier.run_begin(std::move(a), ts);
}

void ComfyUIRecognizer::end_prompt(StepApplier& applier, std::int64_t ts, std::string_view reported) {
  end_lora(applier, ts);
  end_failure(applier, ts);
  end_checkpoint(applier, ts, "inferred:prompt end");
  if (vae_token_ != 0 && applier.is_open(vae_token_)) {
    applier.end(Origin::kOutput, vae_token_, ts, "inferred:prompt end");
  }
  vae_token_ = 0;
  if (!prompt_failed_ && applier.seen_kind(StepKind::kSampling)) {
    infer_gap(applier, StepKind::kVaeDecode, "vae decode and save",
              "ComfyUI prints nothing for VAEDecode and SaveImage: the time from the last step "
              "after sampling to the prompt's end", ts);
  }
  if (!reported.empty()) {
    applier.announced_label("comfyui.reported", std::string(reported));
    std::optional<double> seconds;
    if (reported.find(':') != std::string_view::npos) {
      seconds = parse_clock_seconds(reported);
    } else if (auto v = leading_number(reported, nullptr)) {
      seconds = v;
    }
    if (seconds) applier.announced_label("comfyui.reported_seconds", std::to_string(*seconds));
  }
  applier.announced_label("comfyui.status", prompt_failed_ ? "failed" : "ok");
  applier.run_end(ts);
  in_prompt_ = false;
  load_token_ = 0;
  load_queue_.clear();
  vae_token_ = 0;
}

void ComfyUIRecognizer::open_load(StepApplier& applier, const std::string& model, std::int64_t ts) {
  if (!is_text_encoder_class(model) && !is_vae_class(model)) {
    // A diffusion model: what ran since the text encoder was ready was text encoding.
    end_checkpoint(applier, ts, "inferred:next phase");
    if (encoder_ready_) {
      infer_gap(applier, StepKind::kTextEncoding, "text encoding",
                "ComfyUI prints nothing for CLIPTextEncode: the time from the text encoder's "
                "load to the diffusion model's", ts);
    }
  }
  OpenOptions o;
  o.source = "comfyui";
  load_model_ = model;
  load_token_ = applier.open(Origin::kOutput, StepKind::kModelLoading, "move " + model + " to device", ts, o);
  if (load_token_ != 0) {
    applier.label(load_token_, "model_class", model);
    applier.label(load_token_, "operation", "device_move");
  }
}

void ComfyUIRecognizer::end_checkpoint(StepApplier& applier, std::int64_t ts,
                                       std::string_view closed_by) {
  if (ckpt_token_ != 0 && applier.is_open(ckpt_token_)) {
    applier.end(Origin::kOutput, ckpt_token_, ts, closed_by);
    encoder_ready_ = true;
  }
  ckpt_token_ = 0;
}

void ComfyUIRecognizer::infer_gap(StepApplier& applier, StepKind kind, std::string_view name,
                                  std::string_view reason, std::int64_t ts) {
  encoder_ready_ = kind == StepKind::kTextEncoding ? false : encoder_ready_;
  if (applier.innermost() != 0) return;  // something is open: no gap
  const std::int64_t from = std::max(applier.last_end_ns(), prompt_start_ns_);
  if (from <= 0 || ts <= from) return;
  StepRecord r;
  r.name = std::string(name);
  r.kind = kind;
  r.source = "comfyui";
  r.inferred = true;
  r.closed_by = "inferred:next line";
  r.duration_ns = ts - from;
  r.labels["inferred.reason"] = std::string(reason);
  applier.add_finished(Origin::kOutput, std::move(r), from);
}

bool ComfyUIRecognizer::checkpoint_line(std::string_view text, StepApplier& applier, std::int64_t ts) {
  if (auto dtype = after(text, "model weight dtype ")) {
    end_checkpoint(applier, ts, "inferred:next checkpoint");
    OpenOptions o;
    o.source = "comfyui";
    o.mergeable = false;
    ckpt_token_ = applier.open(Origin::kOutput, StepKind::kModelLoading, "load checkpoint", ts, o);
    if (ckpt_token_ != 0) {
      const std::string_view d = trim(*dtype);
      const std::size_t comma = d.find(", manual cast: ");
      applier.label(ckpt_token_, "weight_dtype", trim(d.substr(0, comma)));
      if (comma != std::string_view::npos) applier.label(ckpt_token_, "manual_cast", trim(d.substr(comma + 15)));
    }
    return true;
  }
  if (ckpt_token_ == 0 || !applier.is_open(ckpt_token_)) return false;
  if (auto type = after(text, "model_type ")) {
    applier.label(ckpt_token_, "model_type", trim(*type));
    return true;
  }
  if (auto vae = after(text, "VAE load device: ")) {
    applier.label(ckpt_token_, "vae_load", trim(*vae));
    return true;
  }
  if (contains(text, "attention in VAE")) return true;
  if (auto clip = after(text, "CLIP/text encoder model load device: ")) {
    applier.label(ckpt_token_, "clip_load", trim(*clip));
    end_checkpoint(applier, ts, kClosedExplicit);  // the loader's last line
    return true;
  }
  if (contains(text, "no CLIP/text encoder weights")) {
    applier.label(ckpt_token_, "clip_load", "none in the checkpoint");
    return true;
  }
  return false;
}

void ComfyUIRecognizer::end_lora(StepApplier& applier, std::int64_t ts) {
  if (lora_token_ == 0) return;
  nlohmann::json data;
  data["count"] = lora_key_count_;
  data["keys"] = lora_keys_;
  data["truncated"] = lora_key_count_ > lora_keys_.size();
  applier.counter(lora_token_, "keys_not_loaded", static_cast<double>(lora_key_count_));
  applier.attach(lora_token_, Attachment{"lora_keys_not_loaded", "lora key not loaded", std::move(data)});
  applier.end(Origin::kOutput, lora_token_, ts, "inferred:next line");  // the warnings only
  lora_token_ = 0;
  lora_keys_.clear();
  lora_key_count_ = 0;
}

void ComfyUIRecognizer::begin_failure(StepApplier& applier, std::string_view message, std::int64_t ts) {
  prompt_failed_ = true;
  failure_active_ = true;
  failure_size_seen_ = false;
  failure_token_ = applier.innermost();
  if (failure_token_ == 0) {
    OpenOptions o;
    o.source = "comfyui";
    o.mergeable = false;
    failure_token_ = applier.open(Origin::kOutput, StepKind::kCustom, "prompt execution", ts, o);
  }
  applier.fail(failure_token_, message.empty() ? std::string_view("exception during processing") : message);
}

void ComfyUIRecognizer::end_failure(StepApplier& applier, std::int64_t ts) {
  if (!failure_active_) return;
  failure_active_ = false;
  if (failure_token_ != 0) {
    if (failure_token_ == load_token_) load_token_ = 0;
    if (failure_token_ == vae_token_) vae_token_ = 0;
    applier.end(Origin::kOutput, failure_token_, ts, "inferred:next line");
  }
  failure_token_ = 0;
}

bool ComfyUIRecognizer::loaded(std::string_view text, StepApplier& applier, std::int64_t ts) {
  std::string_view rest;
  std::string how;
  if (auto r = after(text, "loaded completely")) {
    rest = *r;
    how = "completely";
  } else if (auto p = after(text, "loaded partially")) {
    rest = *p;
    how = "partially";
  } else if (auto l = after(text, "loaded in lowvram mode")) {
    rest = *l;
    how = "lowvram";
  } else {
    return false;
  }
  if (load_token_ == 0 || !applier.is_open(load_token_)) {
    load_token_ = 0;
    return true;  // a load we did not see requested (e.g. attached mid-prompt)
  }
  const int token = load_token_;
  applier.label(token, "load", how);
  if (!rest.empty() && rest.front() == ';') {
    // Current format: "; 22338.93 MB usable, 1560.80 MB loaded, full load: True"
    rest.remove_prefix(1);
    while (!rest.empty()) {
      const std::size_t comma = rest.find(", ");
      const std::string_view piece = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
      std::string_view unit;
      if (auto v = leading_number(piece, &unit)) {
        unit = trim(unit);
        if (unit == "MB usable") applier.counter(token, "usable_bytes", *v * kMiB);
        if (unit == "MB loaded") applier.counter(token, "moved_bytes", *v * kMiB);
        if (unit == "MB offloaded") applier.counter(token, "offloaded_bytes", *v * kMiB);
        if (unit == "MB buffer reserved") applier.counter(token, "buffer_reserved_bytes", *v * kMiB);
      } else if (auto f = after(piece, "full load: ")) {
        applier.label(token, "full_load", trim(*f));
      } else if (auto pt = after(piece, "lowvram patches: ")) {
        if (auto n = parse_number(trim(*pt))) applier.counter(token, "lowvram_patches", *n);
      }
    }
  } else {
    // 2023-2024 format: numbers separated by spaces.
    std::vector<std::string_view> fields;
    rest = trim(rest);
    while (!rest.empty()) {
      const std::size_t sp = rest.find(' ');
      fields.push_back(rest.substr(0, sp));
      rest = sp == std::string_view::npos ? std::string_view() : trim(rest.substr(sp + 1));
    }
    if (!fields.empty()) {
      if (auto v = parse_number(fields[0])) applier.counter(token, "usable_bytes", *v * kMiB);
    }
    if (fields.size() > 1) {
      if (auto v = parse_number(fields[1])) applier.counter(token, "moved_bytes", *v * kMiB);
    }
    if (fields.size() > 2) {
      if (how == "completely") {
        applier.label(token, "full_load", fields[2]);
      } else if (auto v = parse_number(fields[2])) {
        applier.counter(token, "lowvram_patches", *v);
      }
    }
  }
  const std::string model = load_model_;
  applier.end(Origin::kOutput, token, ts);
  load_token_ = 0;
  if (is_text_encoder_class(model)) encoder_ready_ = true;
  if (!load_queue_.empty()) {
    const std::string next = load_queue_.front();
    load_queue_.pop_front();
    open_load(applier, next, ts);
  }
  return true;
}

void ComfyUIRecognizer::note_size(std::string_view text, StepApplier& applier) {
  if (failure_size_seen_) return;
  if (auto size = after(text, "out of memory. Tried to allocate ")) {
    if (auto bytes = parse_size_bytes(*size)) {
      applier.counter(failure_token_, "tried_to_allocate_bytes", *bytes);
      failure_size_seen_ = true;
    }
  }
}

void ComfyUIRecognizer::vae_retry(std::string_view text, StepApplier& applier, std::int64_t ts) {
  const bool decoding = contains(text, "decoding");
  const StepKind kind = decoding ? StepKind::kVaeDecode : StepKind::kLatentGeneration;
  if (vae_token_ == 0 || !applier.is_open(vae_token_) || applier.kind_of(vae_token_) != kind) {
    OpenOptions o;
    o.source = "comfyui";
    o.ends_at_next_step = true;
    o.mergeable = false;
    // The regular attempt began when the last step ended (nothing announces it).
    const std::int64_t from = applier.innermost() == 0 && applier.last_end_ns() > prompt_start_ns_
                                  ? std::min(applier.last_end_ns(), ts)
                                  : ts;
    vae_token_ = applier.open(Origin::kOutput, kind, decoding ? "vae decode" : "vae encode", from, o);
    if (vae_token_ == 0) return;
    applier.mark_inferred(vae_token_, "began when the step before it ended; ComfyUI prints "
                                      "only the retry");
  }
  const int token = vae_token_;
  applier.attempt(token, Attempt{"regular", StepStatus::kFailed, "out of memory",
                                 std::max<std::int64_t>(0, ts - applier.opened_at(token))});
  // The tiled attempt ends with the step (whoever ends it): it failed when the step did.
  tiled_since_ = ts;
  applier.set_before_end(token, [this, &applier](int t, std::int64_t end_ns) {
    applier.attempt(t, Attempt{"tiled", applier.failed(t) ? StepStatus::kFailed : StepStatus::kOk,
                               applier.failed(t) ? "the step failed" : "",
                               std::max<std::int64_t>(0, end_ns - tiled_since_)});
  });
}

LineResult ComfyUIRecognizer::on_line(const OutputLine& line, StepApplier& applier) {
  const std::string_view text = line.text;
  const std::int64_t ts = line.steady_ns;
  if (text.empty()) return {};
  const bool lora_line = contains(text, "lora key not loaded");
  if (lora_token_ != 0 && !lora_line) end_lora(applier, ts);

  if (failure_active_) {
    std::string_view type;
    std::string_view message;
    if (exception_line(trim(text), &type, &message)) {
      applier.fail(failure_token_, message, type);
    }
  }
  if (failure_active_) note_size(text, applier);

  if (contains(text, "got prompt")) {
    end_failure(applier, ts);
    if (in_prompt_) {
      ++queued_;
    } else {
      begin_prompt(applier, ts);
    }
    return {true, {}};
  }
  if (contains(text, "invalid prompt:")) {
    if (queued_ > 0) {
      --queued_;
    } else if (in_prompt_) {
      applier.announced_label("comfyui.status", "invalid");
      applier.announced_label("comfyui.invalid", std::string(trim(*after(text, "invalid prompt:"))));
      prompt_failed_ = false;
      applier.run_end(ts);
      in_prompt_ = false;
      load_token_ = 0;
      load_queue_.clear();
    }
    return {true, {}};
  }
  if (auto reported = after(text, "Prompt executed in ")) {
    std::string_view r = trim(*reported);
    if (r.size() > 8 && r.substr(r.size() - 8) == " seconds") r.remove_suffix(8);
    if (in_prompt_) end_prompt(applier, ts, r);
    if (queued_ > 0) {
      --queued_;
      begin_prompt(applier, ts);
    }
    return {true, {}};
  }
  if (contains(text, "%|")) {
    // A progress bar (read by the tqdm recogniser): sampling begins, so the text encoder's
    // work before it is over.
    if (encoder_ready_ && in_prompt_) {
      end_checkpoint(applier, ts, "inferred:next phase");
      infer_gap(applier, StepKind::kTextEncoding, "text encoding",
                "ComfyUI prints nothing for CLIPTextEncode: the time from the text encoder's "
                "load to the sampler's first frame", ts);
    }
    return {};
  }
  if (checkpoint_line(text, applier, ts)) return {true, {}};
  if (auto model = after(text, "Requested to load ")) {
    end_failure(applier, ts);
    const std::string m(trim(*model));
    if (load_token_ != 0 && applier.is_open(load_token_)) {
      load_queue_.push_back(m);
    } else {
      open_load(applier, m, ts);
    }
    return {true, {}};
  }
  if (loaded(text, applier, ts)) return {true, {}};
  if (lora_line) {
    const std::string_view key = trim(*after(text, "lora key not loaded"));
    const std::string_view k = !key.empty() && key.front() == ':' ? trim(key.substr(1)) : key;
    if (lora_token_ == 0) {
      end_checkpoint(applier, ts, "inferred:next phase");  // LoraLoader runs after the loader
      OpenOptions o;
      o.source = "comfyui";
      lora_token_ = applier.open(Origin::kOutput, StepKind::kLoraApplication, "lora", ts, o);
      if (lora_token_ == 0) return {true, {}};
      applier.label(lora_token_, "watch.boundary", "the warning lines only");
    }
    ++lora_key_count_;
    if (lora_keys_.size() < kMaxLoraKeys) lora_keys_.emplace_back(k);
    return {true, {}};
  }
  if (contains(text, "Ran out of memory when regular")) {
    vae_retry(text, applier, ts);
    return {true, {}};
  }
  if (auto msg = after(text, "Exception during processing")) {
    std::string_view m = trim(*msg);
    while (!m.empty() && m.front() == '!') m.remove_prefix(1);
    m = trim(m);
    if (!failure_active_) begin_failure(applier, m, ts);
    if (!m.empty()) applier.fail(failure_token_, m);
    note_size(text, applier);
    return {true, {}};
  }
  if (contains(text, "An error occurred while executing a workflow")) {
    if (!failure_active_) begin_failure(applier, "An error occurred while executing a workflow", ts);
    return {true, {}};
  }
  if (contains(text, "Got an OOM")) {
    if (!failure_active_) begin_failure(applier, trim(text), ts);
    applier.label(failure_token_, "comfyui.oom", "true");
    end_failure(applier, ts);
    return {true, {}};
  }
  if (contains(text, "out of memory. Tried to allocate") && !failure_active_) {
    // PyTorch's OOM text outside ComfyUI's own failure lines (a custom node printing it).
    std::string_view type;
    std::string_view message;
    if (!exception_line(trim(text), &type, &message)) message = trim(text);
    begin_failure(applier, message, ts);
    if (!type.empty()) applier.fail(failure_token_, message, type);
    note_size(text, applier);
    return {true, {}};
  }
  return {};
}

}  // namespace genscope::watch
