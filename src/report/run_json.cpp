// The run document: Run <-> JSON ("schema": "genscope.run/1"), atomic file writing.
#include "genscope/run_json.hpp"

#include <cmath>
#include <fstream>
#include <functional>

#include "genscope/error.hpp"
#include "report/json_dom.hpp"
#include "report/memory_room.hpp"
#include "report/run_document_text.hpp"

namespace genscope {

using nlohmann::json;

namespace {

json number(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json efficiency_json(const StepRecord& s) {
  // Seed 001's efficiency figures: allocated/reserved per allocator, cleanup effectiveness.
  json e = json::object();
  for (const MetricFigures& m : s.metrics) {
    const std::string suffix = ".allocated_bytes";
    if (m.name.size() > suffix.size() &&
        m.name.compare(m.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string prefix = m.name.substr(0, m.name.size() - suffix.size());
      const MetricFigures* reserved = s.metric(prefix + ".reserved_bytes");
      if (reserved != nullptr) {
        json r;
        r["after_percent"] = number(reserved->after > 0 ? m.after / reserved->after * 100 : kNaN);
        r["peak_percent"] = number(reserved->peak > 0 ? m.peak / reserved->peak * 100 : kNaN);
        e["allocated_reserved_ratio"][prefix] = r;
      }
    }
    const double c = m.cleanup_effectiveness();
    if (!std::isnan(c) && m.unit == Unit::kBytes) e["cleanup_effectiveness"][m.name] = c;
  }
  return e;
}

json step_json(const StepRecord& s) {
  json j;
  j["id"] = s.id;
  j["parent_id"] = s.parent_id;
  j["name"] = s.name;
  j["kind"] = to_string(s.kind);
  j["status"] = to_string(s.status);
  if (!s.error_message.empty() || !s.error_type.empty()) {
    j["error"] = {{"type", s.error_type}, {"message", s.error_message}};
  }
  if (!s.source.empty()) j["source"] = s.source;
  if (!s.closed_by.empty()) j["closed_by"] = s.closed_by;
  if (s.inferred) j["inferred"] = true;
  j["thread"] = s.thread;
  j["start_offset_ns"] = s.start_offset_ns;
  j["duration_ns"] = s.duration_ns;
  json metrics = json::array();
  for (const MetricFigures& m : s.metrics) {
    metrics.push_back({{"name", m.name},
                       {"unit", to_string(m.unit)},
                       {"before", number(m.before)},
                       {"after", number(m.after)},
                       {"peak", number(m.peak)},
                       {"peak_offset_ns", m.peak_offset_ns},
                       {"peak_source", m.peak_source},
                       {"delta", number(m.delta())},
                       {"delta_percent", number(m.delta_percent())}});
  }
  j["metrics"] = std::move(metrics);
  json attempts = json::array();
  for (const Attempt& a : s.attempts) {
    attempts.push_back({{"strategy", a.strategy},
                        {"outcome", to_string(a.outcome)},
                        {"error", a.error},
                        {"duration_ns", a.duration_ns}});
  }
  j["attempts"] = std::move(attempts);
  if (!s.iteration_ns.empty()) {
    const IterationStats it = summarize_iterations(s.iteration_ns);
    j["iterations"] = {{"durations_ns", s.iteration_ns},
                       {"count", it.count},
                       {"first_ns", number(it.first_ns)},
                       {"mean_ns", number(it.mean_ns)},
                       {"mean_rest_ns", number(it.mean_rest_ns)},
                       {"p50_ns", number(it.p50_ns)},
                       {"p95_ns", number(it.p95_ns)},
                       {"min_ns", number(it.min_ns)},
                       {"max_ns", number(it.max_ns)},
                       {"stddev_ns", number(it.stddev_ns)},
                       {"iterations_per_second", number(it.iterations_per_second)},
                       {"inferred", s.iterations_inferred}};
  }
  j["counters"] = s.counters;
  json rates = json::object();
  for (const auto& [name, value] : s.counters) rates[name + "_per_second"] = number(s.rate(name));
  j["rates"] = std::move(rates);
  j["efficiency"] = efficiency_json(s);
  j["labels"] = s.labels;
  json attachments = json::array();
  for (const Attachment& a : s.attachments) {
    attachments.push_back({{"type", a.type}, {"name", a.name}, {"data", a.data}});
  }
  j["attachments"] = std::move(attachments);
  return j;
}

json series_json(const TimeSeries& t) {
  json j;
  j["interval_ns"] = t.interval_ns;
  if (t.max_interval_ns > t.interval_ns) j["max_interval_ns"] = t.max_interval_ns;
  j["samples_taken"] = t.samples_taken;
  j["capacity"] = t.capacity;
  json metrics = json::array();
  for (std::size_t m = 0; m < t.metrics.size(); ++m) {
    metrics.push_back({{"name", t.metrics[m]},
                       {"unit", to_string(m < t.units.size() ? t.units[m] : Unit::kCount)}});
  }
  j["metrics"] = std::move(metrics);
  j["offset_ns"] = t.offset_ns;
  json columns = json::array();
  for (std::size_t m = 0; m < t.metrics.size(); ++m) {
    json col = json::array();
    for (std::size_t i = 0; i < t.size(); ++i) col.push_back(number(t.at(i, m)));
    columns.push_back(std::move(col));
  }
  j["values"] = std::move(columns);
  return j;
}

json distributed_json(const DistributedInfo& d) {
  return {{"role", d.role},           {"rank", d.rank},
          {"world_size", d.world_size}, {"local_rank", d.local_rank},
          {"node_rank", d.node_rank},   {"group", d.group},
          {"group_source", d.group_source}, {"pid", d.pid}};
}

// --- reading ------------------------------------------------------------------------------

[[noreturn]] void invalid(const std::string& path, const std::string& what) {
  throw Error("InvalidRunDocument", path + ": " + what);
}

const json* member(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

std::string get_string(const json& j, const char* key, const std::string& path) {
  const json* v = member(j, key);
  if (v == nullptr || v->is_null()) return {};
  if (!v->is_string()) invalid(path + "." + key, "expected a string");
  return v->get<std::string>();
}

std::int64_t get_int(const json& j, const char* key, const std::string& path, std::int64_t def = 0) {
  const json* v = member(j, key);
  if (v == nullptr || v->is_null()) return def;
  if (!v->is_number()) invalid(path + "." + key, "expected a number");
  if (v->is_number_float()) {
    const double d = v->get<double>();
    // [-2^63, 2^63): what converts to int64 without undefined behaviour.
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
      invalid(path + "." + key, "number out of the 64-bit integer range");
    }
    return static_cast<std::int64_t>(d);
  }
  if (v->is_number_unsigned() && v->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
    invalid(path + "." + key, "number out of the 64-bit integer range");
  }
  return v->get<std::int64_t>();
}

double get_double(const json& j, const char* key, const std::string& path) {
  const json* v = member(j, key);
  if (v == nullptr || v->is_null()) return kNaN;
  if (!v->is_number()) invalid(path + "." + key, "expected a number or null");
  return v->get<double>();
}

const json& get_array(const json& j, const char* key, const std::string& path) {
  static const json empty = json::array();
  const json* v = member(j, key);
  if (v == nullptr || v->is_null()) return empty;
  if (!v->is_array()) invalid(path + "." + key, "expected an array");
  return *v;
}

std::map<std::string, std::string> get_string_map(const json& j, const char* key,
                                                  const std::string& path) {
  std::map<std::string, std::string> out;
  const json* v = member(j, key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_object()) invalid(path + "." + key, "expected an object");
  for (auto it = v->begin(); it != v->end(); ++it) {
    if (it.value().is_string()) {
      out[it.key()] = it.value().get<std::string>();
    } else {
      out[it.key()] = it.value().dump();
    }
  }
  return out;
}

std::vector<Attachment> read_attachments(const json& j, const std::string& path) {
  std::vector<Attachment> out;
  const json& arr = get_array(j, "attachments", path);
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const std::string p = path + ".attachments[" + std::to_string(i) + "]";
    if (!arr[i].is_object()) invalid(p, "expected an object");
    Attachment a;
    a.type = get_string(arr[i], "type", p);
    a.name = get_string(arr[i], "name", p);
    if (const json* d = member(arr[i], "data")) a.data = *d;
    out.push_back(std::move(a));
  }
  return out;
}

DistributedInfo read_distributed(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path, "expected an object");
  DistributedInfo d;
  d.role = get_string(j, "role", path);
  if (d.role.empty()) d.role = "rank";
  if (d.role != "rank" && d.role != "launcher") invalid(path + ".role", "expected 'rank' or 'launcher', not '" + d.role + "'");
  const auto small = [&](const char* key, std::int64_t def) {
    const std::int64_t v = get_int(j, key, path, def);
    if (v < -1 || v > 1'000'000'000) invalid(path + "." + key, "out of range: " + std::to_string(v));
    return static_cast<int>(v);
  };
  d.rank = small("rank", -1);
  d.world_size = small("world_size", 0);
  d.local_rank = small("local_rank", -1);
  d.node_rank = small("node_rank", -1);
  if (d.role == "rank" && (d.rank < 0 || (d.world_size > 0 && d.rank >= d.world_size))) {
    invalid(path + ".rank", "rank " + std::to_string(d.rank) + " is not in [0, world_size " +
                                std::to_string(d.world_size) + ")");
  }
  d.group = get_string(j, "group", path);
  d.group_source = get_string(j, "group_source", path);
  const std::int64_t pid = get_int(j, "pid", path, 0);
  if (pid < 0 || pid > 1'000'000'000) invalid(path + ".pid", "out of range: " + std::to_string(pid));
  d.pid = static_cast<int>(pid);
  return d;
}

StepStatus parse_status(const std::string& s, const std::string& path) {
  auto st = parse_step_status(s);
  if (!st) invalid(path, "unknown status '" + s + "'");
  return *st;
}

StepRecord read_step(const json& j, const std::string& path) {
  if (!j.is_object()) invalid(path, "expected an object");
  StepRecord s;
  s.id = static_cast<int>(get_int(j, "id", path));
  s.parent_id = static_cast<int>(get_int(j, "parent_id", path, -1));
  s.name = get_string(j, "name", path);
  const std::string kind = get_string(j, "kind", path);
  auto k = parse_step_kind(kind);
  if (!k) invalid(path + ".kind", "unknown step kind '" + kind + "'");
  s.kind = *k;
  s.status = parse_status(get_string(j, "status", path), path + ".status");
  if (const json* e = member(j, "error"); e != nullptr && e->is_object()) {
    s.error_type = get_string(*e, "type", path + ".error");
    s.error_message = get_string(*e, "message", path + ".error");
  }
  s.source = get_string(j, "source", path);
  s.closed_by = get_string(j, "closed_by", path);
  if (const json* inf = member(j, "inferred"); inf != nullptr && !inf->is_null()) {
    if (!inf->is_boolean()) invalid(path + ".inferred", "expected a boolean");
    s.inferred = inf->get<bool>();
  }
  s.thread = static_cast<int>(get_int(j, "thread", path));
  s.start_offset_ns = get_int(j, "start_offset_ns", path);
  s.duration_ns = get_int(j, "duration_ns", path);
  const json& metrics = get_array(j, "metrics", path);
  for (std::size_t i = 0; i < metrics.size(); ++i) {
    const std::string p = path + ".metrics[" + std::to_string(i) + "]";
    if (!metrics[i].is_object()) invalid(p, "expected an object");
    MetricFigures m;
    m.name = get_string(metrics[i], "name", p);
    m.unit = parse_unit(get_string(metrics[i], "unit", p));
    m.before = get_double(metrics[i], "before", p);
    m.after = get_double(metrics[i], "after", p);
    m.peak = get_double(metrics[i], "peak", p);
    m.peak_offset_ns = get_int(metrics[i], "peak_offset_ns", p, -1);
    m.peak_source = get_string(metrics[i], "peak_source", p);
    s.metrics.push_back(std::move(m));
  }
  const json& attempts = get_array(j, "attempts", path);
  for (std::size_t i = 0; i < attempts.size(); ++i) {
    const std::string p = path + ".attempts[" + std::to_string(i) + "]";
    if (!attempts[i].is_object()) invalid(p, "expected an object");
    Attempt a;
    a.strategy = get_string(attempts[i], "strategy", p);
    a.outcome = parse_status(get_string(attempts[i], "outcome", p), p + ".outcome");
    a.error = get_string(attempts[i], "error", p);
    a.duration_ns = get_int(attempts[i], "duration_ns", p);
    s.attempts.push_back(std::move(a));
  }
  if (const json* it = member(j, "iterations"); it != nullptr && it->is_object()) {
    const json& d = get_array(*it, "durations_ns", path + ".iterations");
    for (const json& v : d) {
      if (!v.is_number()) invalid(path + ".iterations.durations_ns", "expected numbers");
      s.iteration_ns.push_back(v.get<std::int64_t>());
    }
    if (const json* inferred = member(*it, "inferred"); inferred != nullptr && !inferred->is_null()) {
      if (!inferred->is_boolean()) invalid(path + ".iterations.inferred", "expected a boolean");
      s.iterations_inferred = inferred->get<bool>();
    }
  }
  if (const json* c = member(j, "counters"); c != nullptr && !c->is_null()) {
    if (!c->is_object()) invalid(path + ".counters", "expected an object");
    for (auto it = c->begin(); it != c->end(); ++it) {
      if (!it.value().is_number()) invalid(path + ".counters." + it.key(), "expected a number");
      s.counters[it.key()] = it.value().get<double>();
    }
  }
  s.labels = get_string_map(j, "labels", path);
  s.attachments = read_attachments(j, path);
  return s;
}

TimeSeries read_series(const json& j, const std::string& path) {
  TimeSeries t;
  if (j.is_null()) return t;
  if (!j.is_object()) invalid(path, "expected an object");
  t.interval_ns = get_int(j, "interval_ns", path);
  t.max_interval_ns = get_int(j, "max_interval_ns", path);
  t.samples_taken = static_cast<std::uint64_t>(get_int(j, "samples_taken", path));
  t.capacity = static_cast<std::size_t>(get_int(j, "capacity", path));
  for (const json& m : get_array(j, "metrics", path)) {
    if (!m.is_object()) invalid(path + ".metrics", "expected objects");
    t.metrics.push_back(get_string(m, "name", path + ".metrics"));
    t.units.push_back(parse_unit(get_string(m, "unit", path + ".metrics")));
  }
  for (const json& v : get_array(j, "offset_ns", path)) {
    if (!v.is_number()) invalid(path + ".offset_ns", "expected numbers");
    t.offset_ns.push_back(v.get<std::int64_t>());
  }
  const json& columns = get_array(j, "values", path);
  if (columns.size() != t.metrics.size()) {
    invalid(path + ".values", "expected one column per metric");
  }
  t.values.assign(t.metrics.size() * t.offset_ns.size(), kNaN);
  for (std::size_t m = 0; m < columns.size(); ++m) {
    if (!columns[m].is_array() || columns[m].size() != t.offset_ns.size()) {
      invalid(path + ".values[" + std::to_string(m) + "]", "expected one value per sample");
    }
    for (std::size_t i = 0; i < t.offset_ns.size(); ++i) {
      const json& v = columns[m][i];
      if (v.is_null()) continue;
      if (!v.is_number()) invalid(path + ".values", "expected numbers or null");
      t.values[i * t.metrics.size() + m] = v.get<double>();
    }
  }
  return t;
}

}  // namespace

json to_json(const StepRecord& step) { return step_json(step); }

StepRecord step_from_json(const json& step) { return read_step(step, "$"); }

json to_json(const Run& run) {
  json j;
  j["schema"] = run.schema;
  j["id"] = run.id;
  j["start_utc"] = run.start_utc;
  j["start_unix_ns"] = run.start_unix_ns;
  j["duration_ns"] = run.duration_ns;
  j["genscope_version"] = run.genscope_version;
  j["host"] = {{"hostname", run.host.hostname},
               {"cpu_model", run.host.cpu_model},
               {"cpu_cores", run.host.cpu_cores},
               {"ram_bytes", number(run.host.ram_bytes)},
               {"os", run.host.os}};
  json gpus = json::array();
  for (const GpuInfo& g : run.gpus) {
    gpus.push_back({{"index", g.index},
                    {"name", g.name},
                    {"uuid", g.uuid},
                    {"driver_version", g.driver_version},
                    {"total_bytes", g.total_bytes}});
  }
  j["gpus"] = std::move(gpus);
  j["pipeline"] = {{"name", run.pipeline.name},
                   {"model", run.pipeline.model},
                   {"architecture", run.pipeline.architecture},
                   {"parameters", run.pipeline.parameters}};
  j["labels"] = run.labels;
  if (run.distributed) j["distributed"] = distributed_json(*run.distributed);
  j["probes"] = run.probes;
  json absent = json::array();
  for (const AbsentProbe& a : run.absent_probes) {
    absent.push_back({{"probe", a.probe}, {"reason", a.reason}});
  }
  j["absent_probes"] = std::move(absent);
  j["notes"] = run.notes;
  json steps = json::array();
  for (const StepRecord& s : run.steps) steps.push_back(step_json(s));
  j["steps"] = std::move(steps);
  j["series"] = series_json(run.series);
  json errors = json::array();
  for (const MonitoringError& e : run.monitoring_errors) {
    errors.push_back({{"source", e.source},
                      {"message", e.message},
                      {"offset_ns", e.offset_ns},
                      {"step", e.step}});
  }
  j["monitoring_errors"] = std::move(errors);
  json attachments = json::array();
  for (const Attachment& a : run.attachments) {
    attachments.push_back({{"type", a.type}, {"name", a.name}, {"data", a.data}});
  }
  j["attachments"] = std::move(attachments);
  return j;
}

Run run_from_json(const json& j) {
  if (!j.is_object()) invalid("$", "a run document is a JSON object");
  Run run;
  run.schema = get_string(j, "schema", "$");
  if (run.schema.empty()) invalid("$.schema", "missing");
  if (run.schema != kRunSchema) {
    throw Error("UnsupportedSchema", "unsupported run document schema '" + run.schema +
                                         "' (this genscope reads " + kRunSchema + ")");
  }
  run.id = get_string(j, "id", "$");
  run.start_utc = get_string(j, "start_utc", "$");
  run.start_unix_ns = get_int(j, "start_unix_ns", "$");
  run.duration_ns = get_int(j, "duration_ns", "$");
  run.genscope_version = get_string(j, "genscope_version", "$");
  if (const json* h = member(j, "host"); h != nullptr && h->is_object()) {
    run.host.hostname = get_string(*h, "hostname", "$.host");
    run.host.cpu_model = get_string(*h, "cpu_model", "$.host");
    run.host.cpu_cores = static_cast<int>(get_int(*h, "cpu_cores", "$.host"));
    run.host.ram_bytes = get_double(*h, "ram_bytes", "$.host");
    run.host.os = get_string(*h, "os", "$.host");
  }
  const json& gpus = get_array(j, "gpus", "$");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string p = "$.gpus[" + std::to_string(i) + "]";
    if (!gpus[i].is_object()) invalid(p, "expected an object");
    GpuInfo g;
    g.index = static_cast<int>(get_int(gpus[i], "index", p));
    g.name = get_string(gpus[i], "name", p);
    g.uuid = get_string(gpus[i], "uuid", p);
    g.driver_version = get_string(gpus[i], "driver_version", p);
    g.total_bytes = get_double(gpus[i], "total_bytes", p);
    run.gpus.push_back(std::move(g));
  }
  if (const json* p = member(j, "pipeline"); p != nullptr && p->is_object()) {
    run.pipeline.name = get_string(*p, "name", "$.pipeline");
    run.pipeline.model = get_string(*p, "model", "$.pipeline");
    run.pipeline.architecture = get_string(*p, "architecture", "$.pipeline");
    run.pipeline.parameters = get_string_map(*p, "parameters", "$.pipeline");
  }
  run.labels = get_string_map(j, "labels", "$");
  // Documents written before the field existed, and runs of one process, have none.
  if (const json* d = member(j, "distributed"); d != nullptr && !d->is_null()) {
    run.distributed = read_distributed(*d, "$.distributed");
  }
  for (const json& v : get_array(j, "probes", "$")) {
    if (v.is_string()) run.probes.push_back(v.get<std::string>());
  }
  // Documents written before the field existed have none: read as no absent probe.
  const json& absent = get_array(j, "absent_probes", "$");
  for (std::size_t i = 0; i < absent.size(); ++i) {
    const std::string p = "$.absent_probes[" + std::to_string(i) + "]";
    if (!absent[i].is_object()) invalid(p, "expected an object");
    run.absent_probes.push_back({get_string(absent[i], "probe", p), get_string(absent[i], "reason", p)});
  }
  for (const json& v : get_array(j, "notes", "$")) {
    if (v.is_string()) run.notes.push_back(v.get<std::string>());
  }
  const json& steps = get_array(j, "steps", "$");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    run.steps.push_back(read_step(steps[i], "$.steps[" + std::to_string(i) + "]"));
  }
  if (const json* s = member(j, "series")) run.series = read_series(*s, "$.series");
  const json& errors = get_array(j, "monitoring_errors", "$");
  for (std::size_t i = 0; i < errors.size(); ++i) {
    const std::string p = "$.monitoring_errors[" + std::to_string(i) + "]";
    if (!errors[i].is_object()) invalid(p, "expected an object");
    MonitoringError e;
    e.source = get_string(errors[i], "source", p);
    e.message = get_string(errors[i], "message", p);
    e.offset_ns = get_int(errors[i], "offset_ns", p);
    e.step = get_string(errors[i], "step", p);
    run.monitoring_errors.push_back(std::move(e));
  }
  run.attachments = read_attachments(j, "$");
  return run;
}

namespace detail {

std::string run_document_text(const Run& run) {
  return to_json(run).dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace detail

void write_run_file(const Run& run, const std::filesystem::path& path) {
  write_file_atomic(path, detail::run_document_text(run));
}

namespace {

[[noreturn]] void too_large(const std::filesystem::path& path, const std::string& why) {
  throw Error("RunDocumentTooLarge", path.string() + ": " + why);
}

}  // namespace

Run read_run_file(const std::filesystem::path& path) {
  Run run;
  read_json_document(path, [&run](const json& document) { run = run_from_json(document); });
  return run;
}

void read_json_document(const std::filesystem::path& path,
                        const std::function<void(const nlohmann::json&)>& use) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("ReadFailed", "cannot open run document " + path.string());
  // Bounded memory: the parsed document takes more than its text (1.5 to 5 times), so a file
  // past the limit is refused by name before anything is read (genscope's own documents stay
  // far below it: series and bars are bounded), and so is one whose text and tree (at least
  // twice its size) cannot fit in the memory this process may still take. Running out of
  // memory anyway is that error too, never an abort: the tree is freed without allocating
  // (detail::JsonDom).
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > kMaxRunDocumentBytes) {
    too_large(path, "it is " + std::to_string(size >> 20) + " MiB; run documents over " +
                        std::to_string(kMaxRunDocumentBytes >> 20) + " MiB are not read");
  }
  if (!ec) {
    const std::optional<detail::MemoryRoom> room = detail::memory_room();
    if (room && 2 * size > room->bytes) {
      too_large(path, "reading this " + std::to_string(size >> 20) +
                          " MiB run document takes at least " + std::to_string((2 * size) >> 20) +
                          " MiB, but only " + std::to_string(room->bytes >> 20) +
                          " MiB are left under " + room->limit);
    }
  }
  try {
    detail::JsonDom dom;
    {
      std::string text;
      if (!ec) {
        text.resize(static_cast<std::size_t>(size));
        in.read(text.data(), static_cast<std::streamsize>(size));
        text.resize(static_cast<std::size_t>(in.gcount()));
      } else {  // not a regular file (a pipe): read it whole, within the limit
        char buf[65536];
        while (in.read(buf, sizeof buf) || in.gcount() > 0) {
          text.append(buf, static_cast<std::size_t>(in.gcount()));
          if (text.size() > kMaxRunDocumentBytes) {
            too_large(path, "run documents over " +
                                std::to_string(kMaxRunDocumentBytes >> 20) + " MiB are not read");
          }
        }
      }
      const std::string error = detail::parse_json_dom(text, dom);
      if (!error.empty()) {
        throw Error("InvalidJson", path.string() + " is not valid JSON (" + error + ")");
      }
    }
    use(dom.value);
  } catch (const std::bad_alloc&) {
    too_large(path, "not enough memory to read this run document" +
                        (ec ? std::string() : " (" + std::to_string(size >> 20) + " MiB)"));
  }
}

}  // namespace genscope
