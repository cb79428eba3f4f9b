// AUTOMATIC1111 stable-diffusion-webui and lllyasviel's Forge as steps.
//
// Lines read (Forge @dfdcbab per docs/ecosystem facts; A1111 has the same modules/ files):
//   Loading weights [{hash}] from {path}       modules/sd_models.py:303 (l.298 "... from cache")
//                                              -> model_loading "load weights" begins
//   Model loaded in {timer.summary()}.          modules/sd_models.py:522; summary is
//                                              "{total:.1f}s (part: x.xs, ...)" (modules/timer.py)
//                                              -> ends it (reported_seconds, the breakdown)
//   Startup time: {summary}.                    webui.py:61 -> run label a1111.startup
//   [Memory Management] Target: {model}, Free GPU: {} MB, Model Require: {} MB, Previously
//     Loaded: {} MB, Inference Require: {} MB, Remaining: {} MB,
//                                              Forge backend/memory_management.py:673
//                                              -> model_loading "load {model}" begins
//   Moving model(s) has taken {:.2f} seconds    backend/memory_management.py:688 -> ends it
//   [LORA] Loading {file} for {model} with unmatched keys [...]
//   [LORA] Loaded {file} for {model}-UNet|-CLIP with {n} keys at weight {w} (skipped {k} keys) ...
//   [LORA] Mismatch {file} for {model}-UNet with {k} keys mismatched in {n} keys
//   [LORA] LoRA version mismatch for {model}: {file}
//                                              Forge extensions-builtin/sd_forge_lora/networks.py
//                                              `load_lora_for_models` (b6cfd7fc)
//                                              -> lora_application "lora {file}" until the next step
//   Total progress: ...                         modules/shared_total_tqdm.py: a second tqdm bar
//                                              (position 1, total = jobs * steps) repeating the
//                                              per-image bars: read here, so that it is no step;
//                                              its last n/total becomes run label a1111.total_progress
// The per-image sampler bars are k-diffusion tqdm bars without desc: the tqdm recogniser reads
// them. A1111/Forge print no line when a generation starts or ends, so a server gives one run
// for the whole program (per-generation runs would need its HTTP API).
#include "watch/a1111_recognizer.hpp"

#include "watch/text_scan.hpp"
#include "watch/tqdm_frame.hpp"

namespace genscope::watch {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

std::string_view basename(std::string_view path) {
  const std::size_t slash = path.find_last_of("/\\");
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// "['a', 'b']" (a Python list repr) -> a, b
std::vector<std::string> python_list(std::string_view s) {
  std::vector<std::string> out;
  s = trim(s);
  if (s.size() < 2 || s.front() != '[') return out;
  s = s.substr(1, s.find(']') == std::string_view::npos ? s.size() - 1 : s.find(']') - 1);
  while (!s.empty()) {
    s = trim(s);
    if (s.empty() || (s.front() != '\'' && s.front() != '"')) break;
    const char q = s.front();
    const std::size_t end = s.find(q, 1);
    if (end == std::string_view::npos) break;
    out.emplace_back(s.substr(1, end - 1));
    s = s.substr(end + 1);
    if (!s.empty() && s.front() == ',') s.remove_prefix(1);
  }
  return out;
}

}  // namespace

std::vector<std::string> A1111Recognizer::anchors() const {
  return {"Loading weights [", "Model loaded in ", "Startup time: ", "[Memory Management] Target: ",
          "Moving model(s) has taken ", "[LORA] ", "Total progress"};
}

int A1111Recognizer::lora_step(StepApplier& applier, std::string_view file, std::int64_t ts) {
  const std::string name = "lora " + std::string(basename(file));
  if (lora_token_ != 0 && applier.is_open(lora_token_) && lora_name_ == name) return lora_token_;
  OpenOptions o;
  o.source = "forge";
  o.ends_at_next_step = true;
  lora_token_ = applier.open(Origin::kOutput, StepKind::kLoraApplication, name, ts, o);
  lora_name_ = name;
  if (lora_token_ != 0) {
    applier.label(lora_token_, "file", file);
    applier.label(lora_token_, "watch.boundary", "from its first [LORA] line to the next step");
  }
  return lora_token_;
}

LineResult A1111Recognizer::on_line(const OutputLine& line, StepApplier& applier) {
  const std::string_view text = trim(line.text);
  const std::int64_t ts = line.steady_ns;
  if (auto frame = parse_tqdm_frame(text); frame && frame->desc == "Total progress") {
    if (frame->total) {
      applier.run_label("a1111.total_progress", std::to_string(static_cast<long long>(frame->n)) + "/" +
                                                    std::to_string(static_cast<long long>(*frame->total)));
    }
    return {true, {}};
  }
  if (auto rest = after(text, "Loading weights [")) {
    if (load_token_ != 0) applier.end(Origin::kOutput, load_token_, ts, "inferred:next load");
    OpenOptions o;
    o.source = "a1111";
    load_token_ = applier.open(Origin::kOutput, StepKind::kModelLoading, "load weights", ts, o);
    const std::size_t close = rest->find(']');
    if (load_token_ != 0 && close != std::string_view::npos) {
      applier.label(load_token_, "hash", rest->substr(0, close));
      if (auto path = after(rest->substr(close), "] from ")) {
        applier.label(load_token_, "checkpoint", basename(trim(*path)));
      }
    }
    return {true, {}};
  }
  if (auto rest = after(text, "Model loaded in ")) {
    std::string_view breakdown;
    const auto seconds = leading_number(*rest, &breakdown);
    if (load_token_ != 0 && applier.is_open(load_token_)) {
      if (seconds) applier.counter(load_token_, "reported_seconds", *seconds);
      const std::size_t open = breakdown.find('(');
      const std::size_t close = breakdown.rfind(')');
      if (open != std::string_view::npos && close != std::string_view::npos && close > open) {
        applier.label(load_token_, "reported_breakdown", breakdown.substr(open + 1, close - open - 1));
      }
      applier.end(Origin::kOutput, load_token_, ts);
    } else if (seconds) {
      StepRecord r;
      r.name = "load weights";
      r.kind = StepKind::kModelLoading;
      r.source = "a1111";
      r.duration_ns = seconds_to_ns(*seconds);
      r.counters["reported_seconds"] = *seconds;
      r.labels["watch.boundary"] = "the program's own duration, up to its line";
      applier.add_finished(Origin::kOutput, std::move(r), ts - r.duration_ns);
    }
    load_token_ = 0;
    return {true, {}};
  }
  if (auto rest = after(text, "Startup time: ")) {
    std::string_view r = trim(*rest);
    if (!r.empty() && r.back() == '.') r.remove_suffix(1);
    applier.run_label("a1111.startup", r);
    return {true, {}};
  }
  if (auto rest = after(text, "[Memory Management] Target: ")) {
    if (memory_token_ != 0) applier.end(Origin::kOutput, memory_token_, ts, "inferred:next load");
    const std::size_t comma = rest->find(',');
    const std::string model(trim(rest->substr(0, comma)));
    OpenOptions o;
    o.source = "forge";
    memory_token_ = applier.open(Origin::kOutput, StepKind::kModelLoading, "load " + model, ts, o);
    if (memory_token_ == 0) return {true, {}};
    applier.label(memory_token_, "model_class", model);
    for (auto [field, counter] : {std::pair{"Free GPU: ", "free_gpu_bytes"},
                                  std::pair{"Model Require: ", "model_require_bytes"},
                                  std::pair{"Previously Loaded: ", "previously_loaded_bytes"},
                                  std::pair{"Inference Require: ", "inference_require_bytes"},
                                  std::pair{"Remaining: ", "remaining_bytes"}}) {
      if (auto v = after(*rest, field)) {
        if (auto mb = leading_number(*v, nullptr)) applier.counter(memory_token_, counter, *mb * kMiB);
      }
    }
    return {true, {}};
  }
  if (auto rest = after(text, "Moving model(s) has taken ")) {
    if (memory_token_ != 0 && applier.is_open(memory_token_)) {
      if (auto s = leading_number(*rest, nullptr)) applier.counter(memory_token_, "reported_seconds", *s);
      applier.end(Origin::kOutput, memory_token_, ts);
    }
    memory_token_ = 0;
    return {true, {}};
  }
  if (auto rest = after(text, "[LORA] ")) {
    const std::string_view r = *rest;
    if (auto mismatch = after(r, "LoRA version mismatch for ")) {
      const std::size_t colon = mismatch->find(": ");
      const std::string_view file = colon == std::string_view::npos ? std::string_view() : trim(mismatch->substr(colon + 2));
      const int token = lora_step(applier, file, ts);
      applier.fail(token, "LoRA version mismatch (more than 12 keys match no layer)");
      return {true, {}};
    }
    for (const char* verb : {"Loading ", "Loaded ", "Mismatch "}) {
      if (!starts_with(r, verb)) continue;
      const std::string_view body = r.substr(std::string_view(verb).size());
      const std::size_t for_at = body.find(" for ");
      if (for_at == std::string_view::npos) break;
      const int token = lora_step(applier, body.substr(0, for_at), ts);
      if (token == 0) return {true, {}};
      const std::string_view tail = body.substr(for_at + 5);
      if (std::string_view(verb) == "Loading ") {
        if (auto keys = after(tail, "with unmatched keys ")) {
          const std::vector<std::string> list = python_list(*keys);
          nlohmann::json data;
          data["count"] = list.size();
          data["keys"] = list;
          applier.counter(token, "keys_unmatched", static_cast<double>(list.size()));
          applier.attach(token, Attachment{"lora_keys_unmatched", "unmatched keys", std::move(data)});
        }
      } else {
        const std::string part = contains(tail, "-CLIP ") ? "clip" : "unet";
        if (std::string_view(verb) == "Loaded ") {
          if (auto n = after(tail, " with ")) {
            if (auto v = leading_number(*n, nullptr)) applier.counter(token, "keys_loaded_" + part, *v);
          }
          if (auto k = after(tail, "(skipped ")) {
            if (auto v = leading_number(*k, nullptr)) applier.counter(token, "keys_skipped_" + part, *v);
          }
          if (auto w = after(tail, " at weight ")) {
            applier.label(token, "weight_" + part, trim(w->substr(0, w->find(' '))));
          }
        } else if (auto k = after(tail, " with ")) {
          if (auto v = leading_number(*k, nullptr)) applier.counter(token, "keys_mismatched_" + part, *v);
          applier.fail(token, "LoRA " + part + " keys mismatched (not applied)");
        }
      }
      return {true, {}};
    }
    return {};
  }
  return {};
}

}  // namespace genscope::watch
