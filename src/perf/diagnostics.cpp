// Diagnostics (each with its evidence) and the static recommendation rule table.
// Thresholds are documented in docs/validation.md.
#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>

#include "genscope/report.hpp"
#include "genscope/statistics.hpp"
#include "genscope/validation.hpp"
#include "perf/perf_internal.hpp"

namespace genscope {
namespace {

constexpr double kHeadroomFraction = 0.10;    // memory_headroom_low below 10% free
constexpr double kFirstIterationFactor = 3.0;  // slow_first_iteration: first > 3x median rest
constexpr double kIterationCv = 0.25;          // high_iteration_variance: CV > 25%
constexpr double kLowUtilizationPercent = 50;  // low_gpu_utilization: mean < 50%
constexpr std::size_t kMinVarianceIterations = 5;

// The total capacity behind a used/resident metric, from step metrics or run metadata.
double capacity_for(const Run& run, const StepRecord& step, const std::string& metric) {
  static const std::regex kGpu(R"(^gpu(\d+)\.used_bytes$)");
  std::smatch m;
  if (std::regex_match(metric, m, kGpu)) {
    const double t = detail::step_metric_max(step, "gpu" + m[1].str() + ".total_bytes");
    if (!std::isnan(t)) return t;
    const int index = std::stoi(m[1].str());
    for (const auto& g : run.gpus)
      if (g.index == index && g.total_bytes > 0) return g.total_bytes;
    return kNaN;
  }
  if (metric == "system.used_bytes" || detail::is_program_rss(metric)) {
    const double t = detail::step_metric_max(step, "system.total_bytes");
    if (!std::isnan(t)) return t;
    return run.host.ram_bytes > 0 ? run.host.ram_bytes : kNaN;
  }
  return kNaN;
}

void headroom(const Run& run, std::vector<Diagnostic>& out) {
  // Per metric, the step with the highest peak.
  std::map<std::string, std::pair<const StepRecord*, double>> worst;
  for (const auto& s : run.steps)
    for (const auto& m : s.metrics) {
      if (m.name.find("used_bytes") == std::string::npos && !detail::is_program_rss(m.name))
        continue;
      const double peak = detail::step_metric_max(s, m.name);
      if (std::isnan(peak)) continue;
      auto& w = worst[m.name];
      if (w.first == nullptr || peak > w.second) w = {&s, peak};
    }
  for (const auto& [metric, w] : worst) {
    const double total = capacity_for(run, *w.first, metric);
    if (!(total > 0)) continue;
    const double free_fraction = (total - w.second) / total;
    if (free_fraction >= kHeadroomFraction) continue;
    out.push_back({"memory_headroom_low", w.first->name,
                   metric + " peaked at " + format_bytes(w.second) + " of " + format_bytes(total),
                   {{"metric", metric},
                    {"peak_bytes", w.second},
                    {"total_bytes", total},
                    {"headroom_percent", 100 * free_fraction}}});
  }
}

void iterations(const StepRecord& s, std::vector<Diagnostic>& out) {
  const auto values = detail::iteration_values(s);
  if (values.size() >= 3) {
    const std::span<const double> rest(values.data() + 1, values.size() - 1);
    const double med = median(rest);
    if (med > 0 && values[0] > kFirstIterationFactor * med)
      out.push_back({"slow_first_iteration", s.name,
                     "first iteration took " + std::to_string(values[0] / med).substr(0, 5) +
                         "x the median of the others",
                     {{"first_ns", values[0]}, {"median_rest_ns", med},
                      {"ratio", values[0] / med}}});
    if (rest.size() >= kMinVarianceIterations) {
      const double cv = coefficient_of_variation(rest);
      if (cv > kIterationCv)
        out.push_back({"high_iteration_variance", s.name,
                       "iteration time coefficient of variation " +
                           std::to_string(100 * cv).substr(0, 5) + "% (first excluded)",
                       {{"cv", cv}, {"mean_ns", mean(rest)}, {"iterations", rest.size()}}});
    }
  }
}

void fallbacks(const StepRecord& s, std::vector<Diagnostic>& out) {
  bool failed = false;
  nlohmann::json chain = nlohmann::json::array();
  for (const auto& a : s.attempts) {
    failed = failed || a.outcome == StepStatus::kFailed;
    chain.push_back({{"strategy", a.strategy},
                     {"outcome", detail::status_name(a.outcome)},
                     {"error", a.error},
                     {"duration_ns", a.duration_ns}});
  }
  if (!failed) return;
  std::string used = "none";
  for (const auto& a : s.attempts)
    if (a.outcome == StepStatus::kOk) used = a.strategy;
  out.push_back({"fallback_used", s.name, "fallback chain ended with strategy \"" + used + "\"",
                 {{"attempts", chain}, {"final_strategy", used}}});
}

// Sums nan_count / pos_inf_count / neg_inf_count found anywhere under `value`.
void count_non_finite(const nlohmann::json& value, double counts[3]) {
  static const char* kFields[3] = {"nan_count", "pos_inf_count", "neg_inf_count"};
  if (value.is_object()) {
    for (const auto& [key, v] : value.items()) {
      bool matched = false;
      for (int i = 0; i < 3; ++i)
        if (key == kFields[i] && v.is_number()) {
          counts[i] += v.get<double>();
          matched = true;
        }
      if (!matched) count_non_finite(v, counts);
    }
  } else if (value.is_array()) {
    for (const auto& v : value) count_non_finite(v, counts);
  }
}

void non_finite(const std::vector<Attachment>& attachments, const std::string& step,
                std::vector<Diagnostic>& out) {
  for (const auto& a : attachments) {
    if (a.type != "tensor") continue;
    double counts[3] = {0, 0, 0};
    const nlohmann::json* root = &a.data;
    if (a.data.is_object() && a.data.contains("stats")) root = &a.data["stats"];
    count_non_finite(*root, counts);
    if (counts[0] + counts[1] + counts[2] <= 0) continue;
    out.push_back({"non_finite_output", step,
                   "tensor \"" + a.name + "\" contains NaN/Inf values",
                   {{"tensor", a.name},
                    {"nan_count", counts[0]},
                    {"pos_inf_count", counts[1]},
                    {"neg_inf_count", counts[2]}}});
  }
}

void utilization(const Run& run, const StepRecord& s, std::vector<Diagnostic>& out) {
  static const std::regex kUtil(R"(^gpu\d+\.utilization_percent$)");
  const auto& series = run.series;
  const std::int64_t begin = s.start_offset_ns, end = s.start_offset_ns + s.duration_ns;
  for (std::size_t c = 0; c < series.metrics.size(); ++c) {
    if (!std::regex_match(series.metrics[c], kUtil)) continue;
    std::vector<double> values;
    for (std::size_t r = 0; r < series.size(); ++r)
      if (series.offset_ns[r] >= begin && series.offset_ns[r] <= end &&
          r * series.metrics.size() + c < series.values.size()) {
        const double v = series.at(r, c);
        if (!std::isnan(v)) values.push_back(v);
      }
    if (values.size() < 3) continue;
    const double m = mean(values);
    if (m < kLowUtilizationPercent)
      out.push_back({"low_gpu_utilization", s.name,
                     series.metrics[c] + " averaged " + std::to_string(m).substr(0, 5) +
                         "% during sampling",
                     {{"metric", series.metrics[c]},
                      {"mean_percent", m},
                      {"samples", values.size()}}});
  }
}

// The rule table: the most specific matching row wins (architecture and step kind count
// one each; kUnknown / nullopt match anything).
struct Rule {
  Architecture architecture;
  std::optional<StepKind> kind;
  const char* diagnostic;
  const char* text;
};

constexpr Architecture kAny = Architecture::kUnknown;
const Rule kRules[] = {
    {kAny, std::nullopt, "dominant_step",
     "Optimise the dominant step first; the other steps cannot recover the target."},
    {kAny, StepKind::kModelLoading, "dominant_step",
     "Model loading dominates: keep the pipeline resident across generations and load "
     "safetensors directly onto the device instead of reloading per request."},
    {Architecture::kMMDiT, StepKind::kSampling, "dominant_step",
     "MMDiT sampling dominates: use SDPA/flash attention that supports joint attention, "
     "bf16 weights, torch.compile of the transformer, or a step-distilled variant."},
    {Architecture::kUNet, StepKind::kSampling, "dominant_step",
     "UNet sampling dominates: enable SDPA attention, fp16/bf16, channels_last and "
     "torch.compile, or reduce the step count."},
    {Architecture::kVideoDiT, StepKind::kSampling, "dominant_step",
     "Video DiT sampling dominates: attention grows with frames x tokens; reduce frames or "
     "resolution, use bf16 + flash attention, or a CFG/step-distilled variant."},
    {kAny, StepKind::kVaeDecode, "dominant_step",
     "VAE decode dominates: decode in bf16/fp16 and tile only when memory requires it."},
    {kAny, std::nullopt, "memory_headroom_low",
     "Less than 10% memory headroom at the peak: enable model CPU offload, attention "
     "slicing or VAE tiling, or reduce batch size / resolution."},
    {Architecture::kVideoDiT, std::nullopt, "memory_headroom_low",
     "Video DiT near the memory limit: reduce frames (latent T = 1 + (F-1)/4), tile the VAE, "
     "swap transformer blocks to the CPU or use FP8 weights."},
    {Architecture::kMMDiT, StepKind::kTextEncoding, "memory_headroom_low",
     "The large text encoder (T5-XXL / Qwen2.5-VL) nears the limit: offload it after "
     "encoding or load it in 8-bit/FP8."},
    {kAny, std::nullopt, "slow_first_iteration",
     "The first iteration pays warm-up (compilation, autotuning, lazy allocation): warm up "
     "once before timing or cache compiled graphs."},
    {kAny, std::nullopt, "high_iteration_variance",
     "Iteration times vary strongly: check thermal/power throttling, other GPU processes, "
     "offload traffic or host synchronisation inside the loop."},
    {kAny, std::nullopt, "fallback_used",
     "A fallback strategy was needed: fix the cause of the failed attempt (often out of "
     "memory) to regain the preferred strategy's speed."},
    {kAny, StepKind::kVaeDecode, "fallback_used",
     "VAE decoding fell back: free the denoiser before decoding or enable tiling up front "
     "to avoid paying for the failed attempt."},
    {kAny, std::nullopt, "non_finite_output",
     "NaN/Inf in outputs: the result is invalid whatever its speed; typical causes are fp16 "
     "overflow (use bf16 or an fp16-fixed VAE), broken LoRA weights or extreme guidance."},
    {kAny, std::nullopt, "low_gpu_utilization",
     "Low GPU utilisation during sampling: the loop waits on the CPU or transfers; avoid "
     "per-step host syncs, disable offload when memory allows, or raise the batch size."},
};

}  // namespace

std::vector<Diagnostic> diagnose(const Run& run, bool time_missed) {
  std::vector<Diagnostic> out;
  if (time_missed) {
    const StepRecord* dominant = nullptr;
    double top_total = 0;
    for (const auto& s : run.steps)
      if (s.parent_id < 0) {
        top_total += static_cast<double>(s.duration_ns);
        if (dominant == nullptr || s.duration_ns > dominant->duration_ns) dominant = &s;
      }
    const double total = run.duration_ns > 0 ? static_cast<double>(run.duration_ns) : top_total;
    if (dominant != nullptr && total > 0) {
      const double share = static_cast<double>(dominant->duration_ns) / total;
      out.push_back({"dominant_step", dominant->name,
                     "step \"" + dominant->name + "\" takes " +
                         std::to_string(100 * share).substr(0, 5) + "% of the run time",
                     {{"duration_ns", dominant->duration_ns},
                      {"run_duration_ns", total},
                      {"share", share}}});
    }
  }
  headroom(run, out);
  for (const auto& s : run.steps) {
    iterations(s, out);
    fallbacks(s, out);
    non_finite(s.attachments, s.name, out);
    if (s.kind == StepKind::kSampling) utilization(run, s, out);
  }
  non_finite(run.attachments, "", out);
  return out;
}

std::vector<Recommendation> recommend(Architecture architecture, const Run& run,
                                      std::span<const Diagnostic> diagnostics) {
  std::vector<Recommendation> out;
  for (const auto& d : diagnostics) {
    std::optional<StepKind> kind;
    for (const auto& s : run.steps)
      if (s.name == d.step) {
        kind = s.kind;
        break;
      }
    const Rule* best = nullptr;
    int best_specificity = -1;
    for (const auto& rule : kRules) {
      if (d.id != rule.diagnostic) continue;
      if (rule.architecture != kAny && rule.architecture != architecture) continue;
      if (rule.kind && rule.kind != kind) continue;
      const int specificity = (rule.architecture != kAny) + (rule.kind.has_value() ? 1 : 0);
      if (specificity > best_specificity) {
        best = &rule;
        best_specificity = specificity;
      }
    }
    if (best == nullptr) continue;
    nlohmann::json evidence = d.evidence;
    evidence["architecture"] = to_string(architecture);
    out.push_back({d.id, d.step, best->text, evidence});
  }
  return out;
}

}  // namespace genscope
