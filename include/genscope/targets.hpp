// Performance targets of a run and of its steps: time ceilings, the seed's 2-5 s window,
// peak-memory ceilings per metric and a minimum sampling rate. Targets come from the API,
// the command line or a JSON targets file keyed by pipeline and step (docs/validation.md).
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace genscope {

/// Targets for one scope: the whole run (empty step) or one named step.
struct Target {
  std::string step;  ///< Step name; empty means the whole run.
  std::optional<double> max_duration_ns;  ///< Hard time ceiling.
  std::optional<double> window_min_ns;    ///< Lower edge of the target window (informational).
  std::optional<double> window_max_ns;    ///< Upper edge of the window: met when duration <= it.
  std::map<std::string, double> max_peak;  ///< Peak ceiling per metric ("gpu0.used_bytes").
  std::optional<double> min_iterations_per_second;  ///< Minimum it/s of the step's iterations.

  /// True when no target is set.
  bool empty() const noexcept;
};

/// All targets that apply to one run.
struct Targets {
  Target run;                 ///< Whole-run targets.
  std::vector<Target> steps;  ///< Per-step targets.

  /// The seed's default: whole run within 2-5 s.
  static Targets defaults();
  /// The step target for `name`, or nullptr.
  const Target* for_step(std::string_view name) const noexcept;
  /// The step target for `name`, created when absent.
  Target& step(std::string_view name);
};

/// Parses one scope object ({"max_seconds":..,"window_seconds":[2,5],"max_peak_bytes":{..},
/// "min_it_per_s":..}). Throws genscope::Error("InvalidTargets") naming the field.
Target target_from_json(const nlohmann::json& object, std::string_view where);
/// Serialises one scope object in the same format.
nlohmann::json to_json(const Target& target);

/// Picks the targets of `pipeline` from a targets document ({"pipelines": {"<name>" |
/// "*": {"run": {...}, "steps": {"<step>": {...}}}}}); "*" applies to every pipeline and a
/// named pipeline overrides it field by field. Throws genscope::Error("InvalidTargets").
Targets targets_from_json(const nlohmann::json& document, std::string_view pipeline);
/// Reads a targets file. Throws genscope::Error("ReadFailed", "InvalidJson", "InvalidTargets").
Targets read_targets_file(const std::filesystem::path& path, std::string_view pipeline);
/// Applies one command-line target spec: "run.max=5s", "run.window=2s..5s",
/// "sampling.max_peak.gpu0.used_bytes=20GB", "sampling.min_it_per_s=4".
/// Throws genscope::Error("InvalidTargets") with the spec.
void apply_target_spec(Targets& targets, std::string_view spec);

/// Parses "5s", "250ms", "1.5min", "30us", "100ns" (bare numbers are seconds) to ns.
/// Throws genscope::Error("InvalidDuration").
double parse_duration_ns(std::string_view text);
/// Parses "20GB", "512MiB", "1e9" (bare numbers are bytes) to bytes (GB = 1e9, GiB = 2^30).
/// Throws genscope::Error("InvalidSize").
double parse_size_bytes(std::string_view text);

}  // namespace genscope
