// Targets: construction, the JSON targets file and command-line target specs.
#include "genscope/targets.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "genscope/error.hpp"

namespace genscope {
namespace {

constexpr double kNsPerSecond = 1e9;

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// Splits "12.5ms" into 12.5 and "ms"; false when there is no leading number.
bool split_number(std::string_view text, double& number, std::string& suffix) {
  const std::string t = trim(text);
  std::size_t used = 0;
  try {
    number = std::stod(t, &used);
  } catch (const std::exception&) {
    return false;
  }
  suffix = trim(std::string_view(t).substr(used));
  for (auto& c : suffix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return std::isfinite(number);
}

double json_duration_seconds(const nlohmann::json& value, const std::string& where) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    try {
      return parse_duration_ns(value.get<std::string>()) / kNsPerSecond;
    } catch (const Error& e) {
      throw Error("InvalidTargets", where + ": " + e.what());
    }
  }
  throw Error("InvalidTargets", where + ": expected seconds (number) or a duration string");
}

double json_size_bytes(const nlohmann::json& value, const std::string& where) {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    try {
      return parse_size_bytes(value.get<std::string>());
    } catch (const Error& e) {
      throw Error("InvalidTargets", where + ": " + e.what());
    }
  }
  throw Error("InvalidTargets", where + ": expected bytes (number) or a size string");
}

void require_positive(double v, const std::string& where) {
  if (!(v > 0) || !std::isfinite(v))
    throw Error("InvalidTargets", where + ": must be a positive finite number");
}

// Copies the fields set in `over` onto `base`.
void merge(Target& base, const Target& over) {
  if (over.max_duration_ns) base.max_duration_ns = over.max_duration_ns;
  if (over.window_min_ns) base.window_min_ns = over.window_min_ns;
  if (over.window_max_ns) base.window_max_ns = over.window_max_ns;
  for (const auto& [k, v] : over.max_peak) base.max_peak[k] = v;
  if (over.min_iterations_per_second)
    base.min_iterations_per_second = over.min_iterations_per_second;
}

void merge_pipeline(Targets& targets, const nlohmann::json& object, const std::string& where) {
  if (!object.is_object()) throw Error("InvalidTargets", where + ": expected an object");
  for (const auto& [key, value] : object.items()) {
    if (key == "run") {
      merge(targets.run, target_from_json(value, where + ".run"));
    } else if (key == "steps") {
      if (!value.is_object()) throw Error("InvalidTargets", where + ".steps: expected an object");
      for (const auto& [step, scope] : value.items()) {
        Target parsed = target_from_json(scope, where + ".steps." + step);
        merge(targets.step(step), parsed);
      }
    } else {
      throw Error("InvalidTargets", where + ": unknown field \"" + key + "\"");
    }
  }
}

}  // namespace

bool Target::empty() const noexcept {
  return !max_duration_ns && !window_min_ns && !window_max_ns && max_peak.empty() &&
         !min_iterations_per_second;
}

Targets Targets::defaults() {
  Targets t;
  t.run.window_min_ns = 2 * kNsPerSecond;
  t.run.window_max_ns = 5 * kNsPerSecond;
  return t;
}

const Target* Targets::for_step(std::string_view name) const noexcept {
  for (const auto& t : steps)
    if (t.step == name) return &t;
  return nullptr;
}

Target& Targets::step(std::string_view name) {
  for (auto& t : steps)
    if (t.step == name) return t;
  steps.push_back(Target{});
  steps.back().step = std::string(name);
  return steps.back();
}

Target target_from_json(const nlohmann::json& object, std::string_view where_view) {
  const std::string where(where_view);
  if (!object.is_object()) throw Error("InvalidTargets", where + ": expected an object");
  Target t;
  for (const auto& [key, value] : object.items()) {
    const std::string field = where + "." + key;
    if (key == "max_seconds") {
      const double s = json_duration_seconds(value, field);
      require_positive(s, field);
      t.max_duration_ns = s * kNsPerSecond;
    } else if (key == "window_seconds") {
      if (!value.is_array() || value.size() != 2)
        throw Error("InvalidTargets", field + ": expected [min, max]");
      const double lo = json_duration_seconds(value[0], field + "[0]");
      const double hi = json_duration_seconds(value[1], field + "[1]");
      require_positive(hi, field + "[1]");
      if (lo < 0 || lo > hi) throw Error("InvalidTargets", field + ": need 0 <= min <= max");
      t.window_min_ns = lo * kNsPerSecond;
      t.window_max_ns = hi * kNsPerSecond;
    } else if (key == "max_peak_bytes") {
      if (!value.is_object()) throw Error("InvalidTargets", field + ": expected an object");
      for (const auto& [metric, limit] : value.items()) {
        const double bytes = json_size_bytes(limit, field + "." + metric);
        require_positive(bytes, field + "." + metric);
        t.max_peak[metric] = bytes;
      }
    } else if (key == "min_it_per_s") {
      if (!value.is_number()) throw Error("InvalidTargets", field + ": expected a number");
      require_positive(value.get<double>(), field);
      t.min_iterations_per_second = value.get<double>();
    } else {
      throw Error("InvalidTargets", where + ": unknown field \"" + key + "\"");
    }
  }
  return t;
}

nlohmann::json to_json(const Target& t) {
  nlohmann::json j = nlohmann::json::object();
  if (t.max_duration_ns) j["max_seconds"] = *t.max_duration_ns / kNsPerSecond;
  if (t.window_max_ns)
    j["window_seconds"] = {t.window_min_ns.value_or(0) / kNsPerSecond,
                           *t.window_max_ns / kNsPerSecond};
  if (!t.max_peak.empty()) j["max_peak_bytes"] = t.max_peak;
  if (t.min_iterations_per_second) j["min_it_per_s"] = *t.min_iterations_per_second;
  return j;
}

Targets targets_from_json(const nlohmann::json& document, std::string_view pipeline) {
  if (!document.is_object()) throw Error("InvalidTargets", "targets: expected an object");
  Targets targets;
  if (!document.contains("pipelines")) {
    nlohmann::json copy = document;
    copy.erase("schema");
    merge_pipeline(targets, copy, "targets");
    return targets;
  }
  for (const auto& [key, value] : document.items())
    if (key != "pipelines" && key != "schema")
      throw Error("InvalidTargets", "targets: unknown field \"" + key + "\"");
  const auto& pipelines = document["pipelines"];
  if (!pipelines.is_object()) throw Error("InvalidTargets", "pipelines: expected an object");
  if (pipelines.contains("*")) merge_pipeline(targets, pipelines["*"], "pipelines.*");
  const std::string name(pipeline);
  if (!name.empty() && pipelines.contains(name))
    merge_pipeline(targets, pipelines[name], "pipelines." + name);
  return targets;
}

Targets read_targets_file(const std::filesystem::path& path, std::string_view pipeline) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("ReadFailed", "cannot read targets file " + path.string());
  std::stringstream buffer;
  buffer << in.rdbuf();
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw Error("InvalidJson", path.string() + ": " + e.what());
  }
  return targets_from_json(document, pipeline);
}

void apply_target_spec(Targets& targets, std::string_view spec) {
  const auto eq = spec.find('=');
  const auto dot = spec.find('.');
  if (eq == std::string_view::npos || dot == std::string_view::npos || dot > eq)
    throw Error("InvalidTargets",
                "target spec \"" + std::string(spec) + "\": expected <run|step>.<field>=<value>");
  const std::string scope(spec.substr(0, dot));
  const std::string field(spec.substr(dot + 1, eq - dot - 1));
  const std::string value = trim(spec.substr(eq + 1));
  Target& t = scope == "run" ? targets.run : targets.step(scope);
  try {
    if (field == "max") {
      t.max_duration_ns = parse_duration_ns(value);
    } else if (field == "window") {
      const auto sep = value.find("..");
      if (sep == std::string::npos) throw Error("InvalidTargets", "window needs min..max");
      const double lo = parse_duration_ns(value.substr(0, sep));
      const double hi = parse_duration_ns(value.substr(sep + 2));
      if (lo < 0 || lo > hi) throw Error("InvalidTargets", "window needs 0 <= min <= max");
      t.window_min_ns = lo;
      t.window_max_ns = hi;
    } else if (field.rfind("max_peak.", 0) == 0 && field.size() > 9) {
      t.max_peak[field.substr(9)] = parse_size_bytes(value);
    } else if (field == "min_it_per_s") {
      double number = 0;
      std::string suffix;
      if (!split_number(value, number, suffix) || !suffix.empty() || !(number > 0))
        throw Error("InvalidTargets", "min_it_per_s needs a positive number");
      t.min_iterations_per_second = number;
    } else {
      throw Error("InvalidTargets", "unknown field \"" + field + "\"");
    }
  } catch (const Error& e) {
    throw Error("InvalidTargets", "target spec \"" + std::string(spec) + "\": " + e.what());
  }
}

double parse_duration_ns(std::string_view text) {
  double number = 0;
  std::string suffix;
  if (!split_number(text, number, suffix) || number < 0)
    throw Error("InvalidDuration", "invalid duration \"" + std::string(text) + "\"");
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1e9},   {"s", 1e9},    {"sec", 1e9}, {"ms", 1e6}, {"us", 1e3}, {"µs", 1e3},
      {"ns", 1},   {"min", 60e9}, {"m", 60e9},  {"h", 3600e9}, {"d", 86400e9}, {"w", 604800e9}};
  for (const auto& [name, factor] : kUnits)
    if (suffix == name) return number * factor;
  throw Error("InvalidDuration", "unknown duration unit in \"" + std::string(text) + "\"");
}

double parse_size_bytes(std::string_view text) {
  double number = 0;
  std::string suffix;
  if (!split_number(text, number, suffix) || number < 0)
    throw Error("InvalidSize", "invalid size \"" + std::string(text) + "\"");
  static const std::pair<const char*, double> kUnits[] = {
      {"", 1},       {"b", 1},         {"kb", 1e3},          {"mb", 1e6},
      {"gb", 1e9},   {"tb", 1e12},     {"kib", 1024.0},      {"mib", 1048576.0},
      {"gib", 1073741824.0},           {"tib", 1099511627776.0}};
  for (const auto& [name, factor] : kUnits)
    if (suffix == name) return number * factor;
  throw Error("InvalidSize", "unknown size unit in \"" + std::string(text) + "\"");
}

}  // namespace genscope
