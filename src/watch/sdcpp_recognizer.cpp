// stable-diffusion.cpp's output as steps (leejet/stable-diffusion.cpp @97d2990 unless noted).
//
// Line format, examples/common/log.cpp `log_print` / `example_log_printf`: "[%-5s] " (or
// "\033[%d;1m[%-5s]\033[0m " with --color), then "%s:%-4d - " (file basename and line), then
// the message; ERROR goes to stderr, the rest to stdout. Early builds printed "[INFO]  ".
// Messages read (src/stable-diffusion.cpp unless noted):
//   l.713   loading model from '%s'  (and "loading <part> from '%s'")   -> model_loading begins
//   src/model_loader.cpp:1304  loading tensors completed, taking %.2fs (read: ...)  -> ends
//   (2023: "loading model from '%s' completed, taking %.2fs")                        -> ends
//   l.1746  total params memory size = %.2fMB (VRAM %.2fMB, RAM %.2fMB): ...  (2023: "total
//           memory buffer size = %.2fMB (...)")  -> counters of the open load, else run labels
//   src/model/adapter/lora.hpp:47  loading LoRA from '%s'       -> lora_application begins
//   lora.hpp:982  WARN unused lora tensor |%s|                  -> attached list
//   lora.hpp:994/997  [Only ](%lu / %lu) LoRA tensors have been applied  -> counters
//   l.2135  apply_loras completed, taking %.2fs                 -> lora step ends (or is added)
//   l.5296  get_learned_condition completed, taking %.2fs | %d ms  -> text_encoding (added)
//   l.5186  encode_first_stage completed, taking ...            -> latent_generation (added)
//   l.4380  sampling using %s method                            -> sampling begins
//   l.5679  generating image: %i/%i - seed %" PRId64            -> labels of the sampling step
//   l.5711  sampling completed, taking %.2fs                    -> sampling ends
//   (2023) decoding %d latents / latent %d decoded, taking %.2fs -> vae_decode begins / counts
//   l.5391  decode_first_stage completed, taking %.2fs          -> vae_decode ends (or is added)
//   l.5861  generate_image completed in %.2fs (txt2img/img2img/generate_video ... in)
//                                                               -> run labels sdcpp.reported*
//   [ERROR] ...                                                 -> the open step fails
// Phases with only a "completed, taking T" line (LoRA without its load line, conditioning,
// encode, decode) are added as steps that ended at the line and lasted the printed T
// (ActiveRun::add_step); their figures come from the samples of that interval.
//
// The bar (src/util.cpp `pretty_progress`, `print_progress_line`):
//   printf("\r%s %i/%i - %s\033[K%s", bar, step, steps, speed, lf), bar = "  |" + 50 of "=>"
//   or ' ' + "|", speed "%.2fs/it" or "%.2fit/s" (the step's own time), nothing for step 0,
//   '\n' after the last. During sampling each frame is one step with its printed time
//   (observed, to 10 ms); frames that skip steps spread their read-time interval (inferred).
//   The same bar counts VAE tiles (counter "tiles") and tensor loading (byte rates, ignored).
#include "watch/sdcpp_recognizer.hpp"

#include <cctype>

#include "watch/text_scan.hpp"

namespace genscope::watch {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;
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
    if (line[k] != '=' && line[k] != '>' && line[k] != ' ') return std::nullopt;
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
  return {"[INFO", "[WARN", "[ERROR", "  |=", "  |>", "  | "};
}

void SdcppRecognizer::attach_lora(StepApplier& applier, int token) {
  if (lora_applied_) {
    applier.counter(token, "lora_tensors_applied", lora_applied_->first);
    applier.counter(token, "lora_tensors_total", lora_applied_->second);
  }
  if (unused_lora_count_ > 0) {
    nlohmann::json data;
    data["count"] = unused_lora_count_;
    data["tensors"] = unused_lora_;
    data["truncated"] = unused_lora_count_ > unused_lora_.size();
    applier.attach(token, Attachment{"lora_tensors_unused", "unused lora tensor", std::move(data)});
  }
  unused_lora_.clear();
  unused_lora_count_ = 0;
  lora_applied_.reset();
}

// A "<phase> completed, taking T" line: ends `token` when it is open, else adds the phase as a
// step that lasted T up to now. Returns the core id of an added step (-1 otherwise).
int SdcppRecognizer::completed(StepApplier& applier, int& token, StepKind kind, std::string_view name,
                               const SdcppLogLine& l, double seconds, std::int64_t ts) {
  if (token != 0 && applier.is_open(token)) {
    applier.counter(token, "reported_seconds", seconds);
    if (kind == StepKind::kLoraApplication) attach_lora(applier, token);
    applier.end(Origin::kOutput, token, ts);
    token = 0;
    return -1;
  }
  token = 0;
  StepRecord r;
  r.name = std::string(name);
  r.kind = kind;
  r.source = std::string(l.where);
  r.duration_ns = seconds_to_ns(seconds);
  r.counters["reported_seconds"] = seconds;
  r.labels["watch.boundary"] = "the program's own duration, up to its line";
  if (kind == StepKind::kLoraApplication) {
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
  return applier.add_finished(Origin::kOutput, std::move(r), ts - seconds_to_ns(seconds));
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
    applier.fail(token, m);
    return;
  }
  if (starts_with(m, "loading LoRA from '")) {
    if (lora_token_ == 0 || !applier.is_open(lora_token_)) {
      lora_token_ = applier.open(Origin::kOutput, StepKind::kLoraApplication, "apply loras", ts, o);
    }
    if (lora_token_ != 0) applier.counter(lora_token_, "files", 1);
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
    if (const auto s = reported_seconds(m, "taking ")) {
      completed(applier, load_token_, StepKind::kModelLoading, "load model", l, *s, ts);
    }
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
    return;
  }
  if (starts_with(m, "apply_loras completed")) {
    if (const auto s = reported_seconds(m, "taking ")) {
      completed(applier, lora_token_, StepKind::kLoraApplication, "apply loras", l, *s, ts);
    }
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
    if (sampling_token_ != 0) applier.end(Origin::kOutput, sampling_token_, ts);
    sampling_token_ = applier.open(Origin::kOutput, StepKind::kSampling, "sampling", ts, o);
    last_step_ = 0;
    last_frame_ns_ = ts;
    std::string_view method = m.substr(15);
    if (method.size() > 7 && method.substr(method.size() - 7) == " method") method.remove_suffix(7);
    if (sampling_token_ != 0) applier.label(sampling_token_, "method", method);
    return;
  }
  if (auto image = after(m, "generating image: ")) {
    const std::size_t dash = image->find(" - seed ");
    if (sampling_token_ != 0) {
      applier.label(sampling_token_, "image", trim(image->substr(0, dash)));
      if (dash != std::string_view::npos) applier.label(sampling_token_, "seed", trim(image->substr(dash + 8)));
    }
    return;
  }
  if (starts_with(m, "sampling") && contains(m, "completed, taking")) {
    if (const auto s = reported_seconds(m, "taking ")) {
      if (sampling_token_ != 0 && applier.is_open(sampling_token_)) {
        applier.counter(sampling_token_, "reported_seconds", *s);
        applier.end(Origin::kOutput, sampling_token_, ts);
      }
      sampling_token_ = 0;
    }
    return;
  }
  if (starts_with(m, "decoding ") && contains(m, " latents")) {
    decode_token_ = applier.open(Origin::kOutput, StepKind::kVaeDecode, "decode_first_stage", ts, o);
    return;
  }
  if (starts_with(m, "latent ") && contains(m, " decoded, taking")) {
    if (decode_token_ != 0) applier.counter(decode_token_, "latents_decoded", 1);
    return;
  }
  if (starts_with(m, "decode_first_stage completed")) {
    if (const auto s = reported_seconds(m, "taking ")) {
      completed(applier, decode_token_, StepKind::kVaeDecode, "decode_first_stage", l, *s, ts);
    }
    return;
  }
  for (const char* what : {"generate_image completed in ", "txt2img completed in ",
                           "img2img completed in ", "generate_video completed in "}) {
    if (auto rest = after(m, what)) {
      applier.run_label("sdcpp.reported", std::string(trim(*rest)));
      if (const auto s = reported_seconds(m, " in ")) applier.run_label("sdcpp.reported_seconds", std::to_string(*s));
      return;
    }
  }
}

void SdcppRecognizer::on_bar(const SdcppBarFrame& f, StepApplier& applier, std::int64_t ts) {
  if (sampling_token_ != 0 && applier.is_open(sampling_token_)) {
    if (f.step <= last_step_) return;  // a repeated frame
    std::vector<std::int64_t> d;
    bool inferred = false;
    if (f.step == last_step_ + 1 && f.seconds_per_step) {
      d.push_back(seconds_to_ns(*f.seconds_per_step));  // the step's own time, printed
    } else {
      spread_evenly(ts - last_frame_ns_, f.step - last_step_, d);
      inferred = f.step - last_step_ > 1;
    }
    applier.iterations(Origin::kOutput, sampling_token_, d, inferred);
    last_step_ = f.step;
    last_frame_ns_ = ts;
    return;
  }
  if (decode_token_ != 0 && applier.is_open(decode_token_) && f.seconds_per_step) {
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
