// The merged document ("schema": "genscope.merged/1"): to_json / merged_from_json of a
// MergedRun (include/genscope/merge.hpp, docs/distributed.md).
#include <cmath>

#include "genscope/error.hpp"
#include "genscope/merge.hpp"
#include "genscope/run_json.hpp"

namespace genscope {
namespace {

using nlohmann::json;

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw Error("InvalidMergedDocument", path + ": " + what);
}

const json& field(const json& j, const char* key, const std::string& path) {
  const auto it = j.find(key);
  if (it == j.end()) invalid(path + "." + key, "missing");
  return *it;
}

std::int64_t integer(const json& j, const char* key, const std::string& path) {
  const json& v = field(j, key, path);
  if (!v.is_number_integer()) invalid(path + "." + key, "expected an integer");
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX))
    invalid(path + "." + key, "number out of the 64-bit integer range");
  return v.get<std::int64_t>();
}

int small_integer(const json& j, const char* key, const std::string& path) {
  const std::int64_t v = integer(j, key, path);
  if (v < -1 || v > 1'000'000'000) invalid(path + "." + key, "out of range: " + std::to_string(v));
  return static_cast<int>(v);
}

double number(const json& j, const char* key, const std::string& path) {
  const json& v = field(j, key, path);
  if (!v.is_number()) invalid(path + "." + key, "expected a number");
  return v.get<double>();
}

std::string text(const json& j, const char* key, const std::string& path) {
  const json& v = field(j, key, path);
  if (!v.is_string()) invalid(path + "." + key, "expected a string");
  return v.get<std::string>();
}

const json& array(const json& j, const char* key, const std::string& path) {
  const json& v = field(j, key, path);
  if (!v.is_array()) invalid(path + "." + key, "expected an array");
  return v;
}

const json& object(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path, "expected an object");
  return j;
}

}  // namespace

json to_json(const MergedRun& m) {
  json ranks = json::array();
  for (const MergedRank& r : m.ranks) {
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"run_id", r.run_id},
                     {"offset_ns", r.offset_ns},
                     {"clock_shift_ns", r.clock_shift_ns},
                     {"duration_ns", r.duration_ns},
                     {"peak_bytes", r.peak_bytes},
                     {"tree_processes", r.tree_processes}});
  }
  json steps = json::array();
  for (const StepSpread& s : m.steps) {
    steps.push_back({{"path", s.path},
                     {"occurrence", s.occurrence},
                     {"kind", to_string(s.kind)},
                     {"duration_ns", s.duration_ns},
                     {"min_ns", s.min_ns},
                     {"median_ns", s.median_ns},
                     {"max_ns", s.max_ns},
                     {"slowest_rank", s.slowest_rank},
                     {"excess", s.excess},
                     {"straggler", s.straggler},
                     {"barrier", s.barrier}});
  }
  json runs = json::array();
  for (const Run& r : m.runs) runs.push_back(to_json(r));
  json out{{"schema", kMergedSchema},
           {"group", m.group},
           {"group_source", m.group_source},
           {"world_size", m.world_size},
           {"straggler_margin", m.straggler_margin},
           {"alignment", m.alignment},
           {"ranks", std::move(ranks)},
           {"steps", std::move(steps)},
           {"runs", std::move(runs)}};
  out["launcher"] = m.launcher ? to_json(*m.launcher) : json(nullptr);
  return out;
}

MergedRun merged_from_json(const json& j) {
  object(j, "$");
  const std::string schema = text(j, "schema", "$");
  if (schema != kMergedSchema) {
    throw Error("UnsupportedSchema", "unsupported merged document schema '" + schema +
                                         "' (this genscope reads " + kMergedSchema + ")");
  }
  MergedRun m;
  m.group = text(j, "group", "$");
  m.group_source = text(j, "group_source", "$");
  m.world_size = small_integer(j, "world_size", "$");
  m.straggler_margin = number(j, "straggler_margin", "$");
  if (!(m.straggler_margin >= 0)) invalid("$.straggler_margin", "must be >= 0");
  m.alignment = text(j, "alignment", "$");
  const json& ranks = array(j, "ranks", "$");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string p = "$.ranks[" + std::to_string(i) + "]";
    const json& r = object(ranks[i], p);
    MergedRank rank;
    rank.rank = small_integer(r, "rank", p);
    rank.host = text(r, "host", p);
    rank.run_id = text(r, "run_id", p);
    rank.offset_ns = integer(r, "offset_ns", p);
    rank.clock_shift_ns = integer(r, "clock_shift_ns", p);
    rank.duration_ns = integer(r, "duration_ns", p);
    if (r.contains("tree_processes")) rank.tree_processes = small_integer(r, "tree_processes", p);
    const json& peaks = field(r, "peak_bytes", p);
    if (!peaks.is_object()) invalid(p + ".peak_bytes", "expected an object");
    for (auto it = peaks.begin(); it != peaks.end(); ++it) {
      if (!it.value().is_number()) invalid(p + ".peak_bytes." + it.key(), "expected a number");
      rank.peak_bytes[it.key()] = it.value().get<double>();
    }
    m.ranks.push_back(std::move(rank));
  }
  const json& steps = array(j, "steps", "$");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string p = "$.steps[" + std::to_string(i) + "]";
    const json& s = object(steps[i], p);
    StepSpread spread;
    spread.path = text(s, "path", p);
    spread.occurrence = small_integer(s, "occurrence", p);
    const std::string kind = text(s, "kind", p);
    const std::optional<StepKind> k = parse_step_kind(kind);
    if (!k) invalid(p + ".kind", "unknown step kind '" + kind + "'");
    spread.kind = *k;
    const json& d = array(s, "duration_ns", p);
    if (d.size() != m.ranks.size())
      invalid(p + ".duration_ns", std::to_string(d.size()) + " durations for " + std::to_string(m.ranks.size()) + " ranks");
    for (std::size_t r = 0; r < d.size(); ++r) {
      if (!d[r].is_number_integer()) invalid(p + ".duration_ns[" + std::to_string(r) + "]", "expected an integer");
      spread.duration_ns.push_back(d[r].get<std::int64_t>());
    }
    spread.min_ns = integer(s, "min_ns", p);
    spread.median_ns = integer(s, "median_ns", p);
    spread.max_ns = integer(s, "max_ns", p);
    spread.slowest_rank = small_integer(s, "slowest_rank", p);
    spread.excess = number(s, "excess", p);
    const json& straggler = field(s, "straggler", p);
    if (!straggler.is_boolean()) invalid(p + ".straggler", "expected true or false");
    spread.straggler = straggler.get<bool>();
    if (const auto b = s.find("barrier"); b != s.end()) {  // optional
      if (!b->is_boolean()) invalid(p + ".barrier", "expected true or false");
      spread.barrier = b->get<bool>();
    }
    m.steps.push_back(std::move(spread));
  }
  const json& runs = array(j, "runs", "$");
  if (runs.size() != m.ranks.size())
    invalid("$.runs", std::to_string(runs.size()) + " runs for " + std::to_string(m.ranks.size()) + " ranks");
  for (const json& r : runs) m.runs.push_back(run_from_json(r));
  if (const auto it = j.find("launcher"); it != j.end() && !it->is_null()) m.launcher = run_from_json(*it);
  return m;
}

}  // namespace genscope

namespace genscope {

SavedDocument read_saved_document(const std::filesystem::path& path) {
  SavedDocument out;
  read_json_document(path, [&out](const nlohmann::json& document) {
    const auto schema = document.is_object() ? document.find("schema") : document.end();
    if (document.is_object() && schema != document.end() && *schema == kMergedSchema) {
      out.merged = merged_from_json(document);
    } else {
      out.run = run_from_json(document);
    }
  });
  return out;
}

}  // namespace genscope
