// stable-diffusion.cpp's output as steps (leejet/stable-diffusion.cpp @97d2990 unless noted).
//
// Line format, examples/common/log.cpp `log_print` / `example_log_printf`: "[%-5s] " (or
// "\033[%d;1m[%-5s]\033[0m " with --color), then "%s:%-4d - " (file basename and line), then
// the message; ERROR goes to stderr, the rest to stdout. Early builds printed "[INFO]  ".
// Messages read (src/stable-diffusion.cpp unless noted; docs/run.md has the table):
//   l.713   loading model from '%s'  (and "loading <part> from '%s'")   -> model_loading begins
//   l.1745  total params memory size = ...  (2023: total memory buffer size)  -> counters
//   l.5628  generate_image %dx%d      -> the load ends (next phase); later loads are lazy
//   src/model_loader.cpp:1304  loading tensors completed, taking %.2fs  -> ends the load
//           before the generation; during it, a lazy "load tensors" step of that duration
//           nested in the phase (or LoRA application) that needed it
//   (2023: "loading model from '%s' completed, taking %.2fs")                        -> ends
//   src/model/adapter/lora.hpp:47  loading LoRA from '%s'       -> one LoRA application begins
//   lora.hpp:982  WARN unused lora tensor |%s|                  -> attached list
//   lora.hpp:994/997  [Only ](%lu / %lu) LoRA tensors have been applied  -> it ends (counters)
//   l.2135  apply_loras completed, taking %.2fs  -> a wrapper step (older builds), or only a
//           run label when 0.00s (current builds apply each LoRA when its model is first used)
//   l.5296  get_learned_condition completed, taking %.2fs | %d ms  -> text_encoding (added)
//   l.5186  encode_first_stage completed, taking ...            -> latent_generation (added)
//   l.4380  sampling using %s method (printed while planning)   -> label of the sampling step
//   l.5679  generating image: %i/%i - seed %" PRId64            -> sampling begins
//   l.5711  sampling completed, taking %.2fs                    -> sampling ends
//   l.5321 decoding %d latents / l.5387 latent %d decoded, taking %.2fs -> vae_decode begins / counts
//   l.5391  decode_first_stage completed, taking %.2fs          -> vae_decode ends (or is added)
//   l.5861  generate_image completed in %.2fs (txt2img/img2img/generate_video ... in)
//                                                               -> run labels sdcpp.reported*
//   examples/cli/main.cpp:490  save result image %d to '%s' (%s)  -> a save step
//   [ERROR] ...                                  -> the open step fails with the first error
// Phases with only a "completed, taking T" line (conditioning, encode, decode) are added as
// steps that ended at the line and lasted the printed T (ActiveRun::add_step); what was read
// while they ran (lazy loads, LoRA applications) is held and added inside them.
// The bar (src/util.cpp `pretty_progress`, `print_progress_line`):
//   printf("\r%s %i/%i - %s\033[K%s", bar, step, steps, speed, lf), bar = "  |" + 50 of "=>"
//   or ' ' + "|", speed "%.2fs/it" or "%.2fit/s" (the step's own time), nothing for step 0,
//   '\n' after the last. During sampling each frame is one step with its printed time
//   (observed, to 10 ms); frames that skip steps spread their read-time interval (inferred).
//   The same bar counts VAE tiles (counter "tiles") and tensor loading (byte rates, ignored).
#include "watch/sdcpp_recognizer.hpp"

#include <algorithm>
#include <cctype>

#include "watch/text_scan.hpp"

namespace genscope::watch {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// sd.cpp prints durations as "%.2fs": a phase placed by its printed duration may seem to start
// up to this much before the step that holds it.
constexpr std::int64_t kRoundingNs = 10'000'000;
constexpr std::size_t kMaxListedTensors = 1000;

// "taking 0.21s", "taking 369 ms", "in 28.29s" -> seconds.
std::optional<double> reported_seconds(std::string_view message, std::string_view marker) {
  const auto rest = after(message, marker);
  if (!rest) return std::nullopt;
  std::string_view unit;
  const auto v = leading_number(*rest, &unit);
  if (!v) return std::nullopt;
  unit = trim(unit);
  if (unit.substr(0, 2) == "ms") return *v / 1000.0;
  if (unit.substr(0, 1) == "s") return *v;
  return std::nullopt;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

}  // namespace

std::optional<SdcppLogLine> parse_sdcpp_log_line(std::string_view line) noexcept {
  line = trim(line);
  if (line.size() < 8 || line.front() != '[') return std::nullopt;
  const std::size_t close = line.find(']');
  if (close == std::string_view::npos || close > 7) return std::nullopt;
  SdcppLogLine l;
  l.level = trim(line.substr(1, close - 1));
  if (l.level != "INFO" && l.level != "WARN" && l.level != "ERROR" && l.level != "DEBUG") return std::nullopt;
  const std::string_view rest = trim(line.substr(close + 1));
  const std::size_t dash = rest.find(" - ");
  if (dash == std::string_view::npos) return std::nullopt;
  l.where = trim(rest.substr(0, dash));
  const std::size_t colon = l.where.rfind(':');
  if (colon == std::string_view::npos || colon + 1 >= l.where.size()) return std::nullopt;
  for (char c : l.where.substr(colon + 1)) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  }
  l.message = trim(rest.substr(dash + 3));
  return l;
}

std::optional<SdcppBarFrame> parse_sdcpp_bar(std::string_view line) noexcept {
  // "  |" + 50 bar characters + "| " step "/" steps " - " speed
  std::size_t i = 0;
  while (i < line.size() && line[i] == ' ') ++i;
  if (i >= line.size() || line[i] != '|') return std::nullopt;
  const std::size_t bar_end = line.find('|', i + 1);
  if (bar_end == std::string_view::npos || bar_end - i - 1 != 50) return std::nullopt;
  for (std::size_t k = i + 1; k < bar_end; ++k) {
    // '=' and '>' for steps, '#' for tensor loading (src/model_loader.cpp)
    if (line[k] != '=' && line[k] != '>' && line[k] != '#' && line[k] != ' ') return std::nullopt;
  }
  std::string_view r = line.substr(bar_end + 1);
  if (r.empty() || r.front() != ' ') return std::nullopt;
  r.remove_prefix(1);
  const std::size_t slash = r.find('/');
  const std::size_t dash = r.find(" - ");
  if (slash == std::string_view::npos || dash == std::string_view::npos || slash > dash) return std::nullopt;
  const auto step = parse_count(r.substr(0, slash));
  const auto steps = parse_count(r.substr(slash + 1, dash - slash - 1));
  if (!step || !steps || *steps == 0 || *step > *steps) return std::nullopt;
  SdcppBarFrame f;
  f.step = *step;
  f.steps = *steps;
  std::string_view unit;
  const auto speed = leading_number(r.substr(dash + 3), &unit);
  if (!speed) return std::nullopt;
  unit = trim(unit);
  if (starts_with(unit, "s/it")) {
    f.seconds_per_step = *speed;
  } else if (starts_with(unit, "it/s")) {
    f.seconds_per_step = *speed > 0 ? 1.0 / *speed : 0.0;
  }
  return f;
}

std::vector<std::string> SdcppRecognizer::anchors() const {
  return {"[INFO", "[WARN", "[ERROR", "  |=", "  |>", "  |#", "  | "};
}

void SdcppRecognizer::lora_figures(StepRecord& r) {
  if (lora_applied_) {
    r.counters["lora_tensors_applied"] = lora_applied_->first;
    r.counters["lora_tensors_total"] = lora_applied_->second;
  }
  if (unused_lora_count_ > 0) {
    nlohmann::json data;
    data["count"] = unused_lora_count_;
    data["tensors"] = unused_lora_;
    data["truncated"] = unused_lora_count_ > unused_lora_.size();
    r.attachments.push_back(Attachment{"lora_tensors_unused", "unused lora tensor", std::move(data)});
  }
  unused_lora_.clear();
  unused_lora_count_ = 0;
  lora_applied_.reset();
}

namespace {

// A phase timed by its printed (rounded) duration starts no earlier than the step holding it;
// what it holds moves with it (a tensor load that began up to the same rounding before it:
// the LoRA's first load once landed at the top level when only the LoRA moved).
template <class HeldT>
void clamp_into(HeldT& h, std::int64_t parent_start) {
  const std::int64_t early = parent_start - h.start;
  if (early <= 0 || early > kRoundingNs) return;
  h.start = parent_start;
  h.record.duration_ns = std::max<std::int64_t>(0, h.record.duration_ns - early);
  for (auto& child : h.children) clamp_into(child, parent_start);
}

}  // namespace

// Records a held phase and its children inside step `parent` (-2: the innermost open step).
void SdcppRecognizer::add_tree(Held& h, StepApplier& applier, int parent, std::string_view phase) {
  if (h.record.kind == StepKind::kLoraApplication && !phase.empty()) h.record.labels["phase"] = std::string(phase);
  const int id = applier.add_finished(Origin::kOutput, h.record, h.start, parent);
  for (Held& c : h.children) add_tree(c, applier, id >= 0 ? id : parent, phase);
}

// A finished phase: inside the LoRA being applied, else inside the open step, else held for
// the phase that will say it ended (conditioning prints only its end).
void SdcppRecognizer::place(Held h, StepApplier& applier) {
  if (lora_ && h.record.kind != StepKind::kLoraApplication) {
    clamp_into(h, lora_->start);
    lora_->children.push_back(std::move(h));
  } else if (const int open = applier.innermost(); open != 0 && open != load_token_) {
    clamp_into(h, applier.opened_at(open));
    const auto kind = applier.kind_of(open);
    add_tree(h, applier, -2, kind ? to_string(*kind) : std::string_view());
  } else {
    held_.push_back(std::move(h));
  }
}

void SdcppRecognizer::flush_held(StepApplier& applier) {
  for (Held& h : held_) add_tree(h, applier, -2, {});
  held_.clear();
}

void SdcppRecognizer::finish_lora(StepApplier& applier, std::int64_t ts, std::string_view closed_by) {
  if (!lora_) return;
  Held h = std::move(*lora_);
  lora_.reset();
  h.record.duration_ns = std::max<std::int64_t>(0, ts - h.start);
  h.record.closed_by = std::string(closed_by);
  lora_figures(h.record);
  place(std::move(h), applier);
}

void SdcppRecognizer::end_load(StepApplier& applier, std::int64_t ts) {
  if (load_token_ != 0 && applier.is_open(load_token_)) {
    applier.end(Origin::kOutput, load_token_, ts, "inferred:next phase");
  }
  load_token_ = 0;
}

// A "<phase> completed, taking T" line: ends `token` when it is open, else adds the phase as a
// step that lasted T up to now, with the phases held for it inside.
void SdcppRecognizer::completed(StepApplier& applier, int& token, StepKind kind, std::string_view name,
                                const SdcppLogLine& l, double seconds, std::int64_t ts) {
  if (token != 0 && applier.is_open(token)) {
    applier.counter(token, "reported_seconds", seconds);
    applier.end(Origin::kOutput, token, ts);
    token = 0;
    return;
  }
  token = 0;
  if (kind != StepKind::kModelLoading) end_load(applier, ts - seconds_to_ns(seconds));
  if (lora_) finish_lora(applier, ts, "inferred:phase end");
  StepRecord r;
  r.name = std::string(name);
  r.kind = kind;
  r.source = std::string(l.where);
  std::int64_t start = ts - seconds_to_ns(seconds);
  // The printed duration is rounded: a phase does not begin before the step ahead of it ended.
  const std::int64_t previous = applier.last_end_ns();
  if (applier.innermost() == 0 && previous > start && previous - start <= kRoundingNs) start = previous;
  r.duration_ns = std::max<std::int64_t>(0, ts - start);
  r.counters["reported_seconds"] = seconds;
  r.labels["watch.boundary"] = "the program's own duration, up to its line";
  const int id = applier.add_finished(Origin::kOutput, std::move(r), start);
  for (Held& h : held_) {
    clamp_into(h, start);
    add_tree(h, applier, id >= 0 ? id : -2, to_string(kind));
  }
  held_.clear();
}

void SdcppRecognizer::on_message(const SdcppLogLine& l, StepApplier& applier, std::int64_t ts) {
  const std::string_view m = l.message;
  OpenOptions o;
  o.source = std::string(l.where);
  if (l.level == "ERROR") {
    int token = applier.innermost();
    if (token == 0) {
      StepRecord r;
      r.name = "error at " + std::string(l.where);
      r.kind = StepKind::kCustom;
      r.status = StepStatus::kFailed;
      r.error_message = std::string(m);
      r.source = std::string(l.where);
      applier.add_finished(Origin::kOutput, std::move(r), ts);
      return;
    }
    if (applier.failed(token)) {
      // The first error is the cause; what follows is kept beside it.
      applier.label(token, "error.next", m);
      return;
    }
    applier.fail(token, m);
    applier.label(token, "error.at", l.where);
    return;
  }
  if (auto lora = after(m, "loading LoRA from '")) {
    finish_lora(applier, ts, "inferred:next LoRA");
    Held h;
    std::string_view path = *lora;
    if (!path.empty() && path.back() == '\'') path.remove_suffix(1);
    const std::size_t slash = path.rfind('/');
    h.record.name = "apply lora " + std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
    h.record.kind = StepKind::kLoraApplication;
    h.record.source = std::string(l.where);
    h.record.labels["file"] = std::string(path);
    h.start = ts;
    lora_ = std::move(h);
    return;
  }
  if (starts_with(m, "loading ") && contains(m, " from '")) {
    if (const auto s = reported_seconds(m, "completed, taking ")) {  // 2023 form
      completed(applier, load_token_, StepKind::kModelLoading, "load model", l, *s, ts);
      return;
    }
    if (load_token_ == 0 || !applier.is_open(load_token_)) {
      load_token_ = applier.open(Origin::kOutput, StepKind::kModelLoading, "load model", ts, o);
    }
    if (load_token_ != 0) applier.counter(load_token_, "files", 1);
    return;
  }
  if (starts_with(m, "loading tensors completed")) {
    const auto s = reported_seconds(m, "taking ");
    if (!s) return;
    if (!generating_ && load_token_ != 0 && applier.is_open(load_token_)) {
      // Loaded at start-up (builds that load every model before generating).
      if (tensors_ > 0) applier.counter(load_token_, "tensors", static_cast<double>(tensors_));
      completed(applier, load_token_, StepKind::kModelLoading, "load model", l, *s, ts);
    } else {
      // Loaded lazily, by the phase that first needs the model.
      Held h;
      h.record.name = "load tensors";
      h.record.kind = StepKind::kModelLoading;
      h.record.source = std::string(l.where);
      h.record.duration_ns = seconds_to_ns(*s);
      h.record.counters["reported_seconds"] = *s;
      if (tensors_ > 0) h.record.counters["tensors"] = static_cast<double>(tensors_);
      h.record.labels["watch.boundary"] = "the program's own duration, up to its line";
      h.start = ts - h.record.duration_ns;
      place(std::move(h), applier);
    }
    tensors_ = 0;
    return;
  }
  if (starts_with(m, "total params memory size = ") || starts_with(m, "total memory buffer size = ")) {
    const auto total = leading_number(*after(m, " = "), nullptr);
    const auto vram = after(m, "(VRAM ");
    const auto ram = after(m, ", RAM ");
    const auto v = vram ? leading_number(*vram, nullptr) : std::nullopt;
    const auto r = ram ? leading_number(*ram, nullptr) : std::nullopt;
    if (load_token_ != 0 && applier.is_open(load_token_)) {
      if (total) applier.counter(load_token_, "params_bytes", *total * kMiB);
      if (v) applier.counter(load_token_, "params_vram_bytes", *v * kMiB);
      if (r) applier.counter(load_token_, "params_ram_bytes", *r * kMiB);
    } else {
      if (total) applier.run_label("sdcpp.params_bytes", std::to_string(*total * kMiB));
      if (v) applier.run_label("sdcpp.params_vram_bytes", std::to_string(*v * kMiB));
      if (r) applier.run_label("sdcpp.params_ram_bytes", std::to_string(*r * kMiB));
    }
    return;
  }
  if (auto tensor = after(m, "unused lora tensor |")) {
    ++unused_lora_count_;
    std::string_view t = *tensor;
    if (!t.empty() && t.back() == '|') t.remove_suffix(1);
    if (unused_lora_.size() < kMaxListedTensors) unused_lora_.emplace_back(t);
    return;
  }
  if (contains(m, "LoRA tensors have been applied")) {
    const auto open = m.find('(');
    if (open != std::string_view::npos) {
      std::string_view rest;
      const auto applied = leading_number(m.substr(open + 1), &rest);
      const auto total = applied ? leading_number(trim(rest).substr(1), nullptr) : std::nullopt;
      if (applied && total) lora_applied_ = std::make_pair(*applied, *total);
    }
    finish_lora(applier, ts, kClosedExplicit);
    return;
  }
  if (starts_with(m, "apply_loras completed")) {
    if (const auto s = reported_seconds(m, "taking ")) {
      if (*s < 0.005 && held_.empty() && !lora_) {
        // Current builds only register the LoRAs here (nothing held: no LoRA was applied
        // yet); each is applied when its model is first used ("loading LoRA from" ...).
        applier.run_label("sdcpp.apply_loras", std::string(trim(*after(m, "taking "))));
        return;
      }
      int none = 0;
      completed(applier, none, StepKind::kLoraApplication, "apply loras", l, *s, ts);
    }
    return;
  }
  if (starts_with(m, "generate_image ") && !contains(m, "completed")) {  // "generate_image 64x64"
    end_load(applier, ts);
    generating_ = true;
    return;
  }
  if (starts_with(m, "get_learned_condition completed")) {
    int none = 0;
    if (const auto s = reported_seconds(m, "taking ")) {
      completed(applier, none, StepKind::kTextEncoding, "get_learned_condition", l, *s, ts);
    }
    return;
  }
  if (starts_with(m, "encode_first_stage completed")) {
    int none = 0;
    if (const auto s = reported_seconds(m, "taking ")) {
      completed(applier, none, StepKind::kLatentGeneration, "encode_first_stage", l, *s, ts);
    }
    return;
  }
  if (starts_with(m, "sampling using ")) {
    // Printed while planning, before conditioning: the method is a label of the sampling
    // step that "generating image" opens.
    std::string_view method = m.substr(15);
    if (method.size() > 7 && method.substr(method.size() - 7) == " method") method.remove_suffix(7);
    method_ = std::string(method);
    return;
  }
  if (auto image = after(m, "generating image: ")) {
    end_load(applier, ts);
    generating_ = true;
    if (lora_) finish_lora(applier, ts, "inferred:phase end");
    flush_held(applier);
    if (sampling_token_ != 0) applier.end(Origin::kOutput, sampling_token_, ts, "inferred:next image");
    sampling_token_ = applier.open(Origin::kOutput, StepKind::kSampling, "sampling", ts, o);
    last_step_ = 0;
    last_frame_ns_ = ts;
    const std::size_t dash = image->find(" - seed ");
    if (sampling_token_ != 0) {
      if (!method_.empty()) applier.label(sampling_token_, "method", method_);
      applier.label(sampling_token_, "image", trim(image->substr(0, dash)));
      if (dash != std::string_view::npos) applier.label(sampling_token_, "seed", trim(image->substr(dash + 8)));
    }
    return;
  }
  if (starts_with(m, "sampling") && contains(m, "completed, taking")) {
    if (const auto s = reported_seconds(m, "taking ")) {
      if (sampling_token_ != 0 && applier.is_open(sampling_token_)) {
        if (lora_) finish_lora(applier, ts, "inferred:phase end");
        applier.counter(sampling_token_, "reported_seconds", *s);
        applier.end(Origin::kOutput, sampling_token_, ts);
      }
      sampling_token_ = 0;
    }
    return;
  }
  if (starts_with(m, "decoding ") && contains(m, " latents")) {
    if (lora_) finish_lora(applier, ts, "inferred:phase end");
    flush_held(applier);
    decode_token_ = applier.open(Origin::kOutput, StepKind::kVaeDecode, "decode_first_stage", ts, o);
    return;
  }
  if (starts_with(m, "latent ") && contains(m, " decoded, taking")) {
    if (decode_token_ != 0) applier.counter(decode_token_, "latents_decoded", 1);
    return;
  }
  if (starts_with(m, "decode_first_stage completed")) {
    if (const auto s = reported_seconds(m, "taking ")) {
      if (lora_ && decode_token_ != 0) finish_lora(applier, ts, "inferred:phase end");
      completed(applier, decode_token_, StepKind::kVaeDecode, "decode_first_stage", l, *s, ts);
    }
    return;
  }
  for (const char* what : {"generate_image completed in ", "txt2img completed in ",
                           "img2img completed in ", "generate_video completed in "}) {
    if (auto rest = after(m, what)) {
      applier.run_label("sdcpp.reported", std::string(trim(*rest)));
      if (const auto s = reported_seconds(m, " in ")) applier.run_label("sdcpp.reported_seconds", std::to_string(*s));
      if (lora_) finish_lora(applier, ts, "inferred:phase end");
      flush_held(applier);
      generated_ns_ = ts;
      return;
    }
  }
  if (auto saved = after(m, "save result image")) {
    // examples/cli/main.cpp: "save result image %d to '%s' (%s)" after writing the file; the
    // saving began when the generation ended (or the previous image was saved).
    std::string_view rest = trim(*saved);
    std::string index;
    if (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest.front()))) {
      const std::size_t sp = rest.find(' ');
      index = std::string(rest.substr(0, sp));
      rest = sp == std::string_view::npos ? std::string_view() : trim(rest.substr(sp));
    }
    const std::int64_t from = std::max(applier.last_end_ns(), generated_ns_);
    StepRecord r;
    r.name = index.empty() ? "save image" : "save image " + index;
    r.kind = StepKind::kSave;
    r.source = std::string(l.where);
    r.duration_ns = from > 0 && from < ts ? ts - from : 0;
    r.counters["images"] = 1;
    r.labels["watch.boundary"] = "from the generation's end (or the previous save) to its line";
    if (auto path = after(rest, "to '")) {
      const std::size_t q = path->find('\'');
      r.labels["path"] = std::string(path->substr(0, q));
    }
    if (contains(rest, "(failure)") || contains(rest, "failed")) {
      r.status = StepStatus::kFailed;
      r.error_message = std::string(m);
    }
    applier.add_finished(Origin::kOutput, std::move(r), ts - r.duration_ns);
    return;
  }
}

void SdcppRecognizer::on_exit(StepApplier& applier, std::int64_t ts) {
  if (lora_) finish_lora(applier, ts, kClosedRunEnd);
  flush_held(applier);
}

void SdcppRecognizer::on_bar(const SdcppBarFrame& f, StepApplier& applier, std::int64_t ts) {
  if (!f.seconds_per_step) {
    tensors_ = f.steps;  // a tensor-loading bar (byte rates)
    return;
  }
  if (sampling_token_ != 0 && applier.is_open(sampling_token_)) {
    if (f.step <= last_step_) return;  // a repeated frame
    std::vector<std::int64_t> d;
    bool inferred = false;
    if (f.step == last_step_ + 1) {
      d.push_back(seconds_to_ns(*f.seconds_per_step));  // the step's own time, printed
    } else {
      spread_evenly(ts - last_frame_ns_, f.step - last_step_, d);
      inferred = true;
    }
    applier.iterations(Origin::kOutput, sampling_token_, d, inferred);
    last_step_ = f.step;
    last_frame_ns_ = ts;
    return;
  }
  if (decode_token_ != 0 && applier.is_open(decode_token_)) {
    applier.label(decode_token_, "tiles", std::to_string(f.step) + "/" + std::to_string(f.steps));
  }
}

LineResult SdcppRecognizer::on_line(const OutputLine& line, StepApplier& applier) {
  if (auto l = parse_sdcpp_log_line(line.text)) {
    on_message(*l, applier, line.steady_ns);
    return {true, {}};
  }
  if (auto f = parse_sdcpp_bar(line.text)) {
    on_bar(*f, applier, line.steady_ns);
    return {true, {}};
  }
  return {};
}

}  // namespace genscope::watch
