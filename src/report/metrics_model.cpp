// MetricsModel: live and finished figures of runs, and their Prometheus names.
//
// Names follow prometheus/docs content/docs/practices/naming.md (one "genscope_" prefix,
// base units as plural suffixes, "_total" for counters, ratios 0-1 instead of percent) and
// pass client_golang's promlint (promtool check metrics); docs/metrics.md lists them all
// with the NVIDIA dcgm-exporter names they correspond to.
#include "report/metrics_model.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <set>
#include <string_view>

#include "genscope/metrics.hpp"
#include "genscope/version.hpp"

namespace genscope::detail {
namespace {

using namespace std::string_literals;

double seconds(double ns) { return ns / 1e9; }

std::string lower_snake(std::string_view text) {
  std::string out;
  for (char c : text) {
    const unsigned char u = static_cast<unsigned char>(c);
    const char s = std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_';
    if (s == '_' && !out.empty() && out.back() == '_') continue;
    out += s;
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return out;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// The figures of one NVML device (src/probes/nvml_probe.cpp; docs/probes.md "nvml").
struct GpuFigure {
  std::string_view figure, family, unit, help;
  bool peak;
};
constexpr GpuFigure kGpuFigures[] = {
    {"total_bytes", "genscope_gpu_memory_total_bytes", "bytes", "GPU memory in total (NVML).", false},
    {"used_bytes", "genscope_gpu_memory_used_bytes", "bytes",
     "GPU memory in use by every process (NVML memory info \"used\"), last sample.", true},
    {"free_bytes", "genscope_gpu_memory_free_bytes", "bytes", "GPU memory free (NVML), last sample.",
     false},
    {"reserved_bytes", "genscope_gpu_memory_reserved_bytes", "bytes",
     "GPU memory reserved by the driver (NVML memory info v2), last sample.", false},
    {"utilization_percent", "genscope_gpu_utilization_ratio", "ratio",
     "Fraction of NVML's sample period during which a kernel ran on the GPU (0-1).", false},
    {"memory_utilization_percent", "genscope_gpu_memory_utilization_ratio", "ratio",
     "Fraction of NVML's sample period during which GPU memory was read or written (0-1).",
     false},
    {"temperature_celsius", "genscope_gpu_temperature_celsius", "celsius",
     "GPU core temperature, last sample.", false},
    {"power_watts", "genscope_gpu_power_watts", "watts",
     "GPU power draw (NVML, about a 1 s average), last sample.", false},
    {"sm_clock_hertz", "genscope_gpu_sm_clock_hertz", "hertz", "GPU SM clock, last sample.", false},
    {"memory_clock_hertz", "genscope_gpu_memory_clock_hertz", "hertz",
     "GPU memory clock, last sample.", false},
    {"process_used_bytes", "genscope_gpu_process_memory_used_bytes", "bytes",
     "GPU memory used by the monitored process (NVML compute processes), last sample.", true},
};

std::string peak_name(std::string_view family) {
  // genscope_x_bytes -> genscope_x_peak_bytes
  std::string name(family);
  return name.substr(0, name.size() - 6) + "_peak_bytes";
}

// Builds the family list: one family per name, in first-use order.
class FamilyList {
 public:
  MetricFamily* get(const std::string& name, MetricType type, std::string_view unit,
                    std::string_view help) {
    auto it = index_.find(name);
    if (it != index_.end()) {
      MetricFamily& f = families_[it->second];
      return f.type == type ? &f : nullptr;  // a name clash of another type is dropped
    }
    index_.emplace(name, families_.size());
    MetricFamily& f = families_.emplace_back();
    f.name = name;
    f.type = type;
    f.unit = unit;
    f.help = help;
    return &f;
  }
  void add(const std::string& name, MetricType type, std::string_view unit, std::string_view help,
           LabelSet labels, double value, bool unique_check = false) {
    MetricFamily* f = get(name, type, unit, help);
    if (f == nullptr) return;
    if (unique_check) {
      for (const MetricPoint& p : f->points) {
        if (p.labels == labels) return;
      }
    }
    MetricPoint& p = f->points.emplace_back();
    p.labels = std::move(labels);
    p.value = value;
  }
  std::vector<MetricFamily> take() { return std::move(families_); }

 private:
  std::vector<MetricFamily> families_;
  std::map<std::string, std::size_t> index_;
};

std::string kind_name(StepKind kind) { return std::string(to_string(kind)); }

}  // namespace

void DurationHistogram::observe(double value) noexcept {
  if (std::isnan(value) || value < 0) return;
  const auto it = std::lower_bound(kDurationBounds.begin(), kDurationBounds.end(), value);
  if (it != kDurationBounds.end()) ++buckets[static_cast<std::size_t>(it - kDurationBounds.begin())];
  ++count;
  sum += value;
}

std::vector<std::uint64_t> DurationHistogram::cumulative() const {
  std::vector<std::uint64_t> out(buckets.size());
  std::uint64_t running = 0;
  for (std::size_t i = 0; i < buckets.size(); ++i) out[i] = running += buckets[i];
  return out;
}

ColumnMetric map_column(const std::string& column, Unit unit) {
  ColumnMetric m;
  m.column = column;
  const std::size_t dot = column.find('.');
  const std::string source = dot == std::string::npos ? std::string() : column.substr(0, dot);
  const std::string figure = dot == std::string::npos ? column : column.substr(dot + 1);

  // gpu<N>.<figure>
  if (source.size() > 3 && source.starts_with("gpu") &&
      std::all_of(source.begin() + 3, source.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    for (const GpuFigure& g : kGpuFigures) {
      if (g.figure != figure) continue;
      m.family = g.family;
      m.unit = g.unit;
      m.help = g.help;
      m.labels = {{"gpu", source.substr(3)}};
      if (g.unit == "ratio") m.scale = 0.01;
      if (g.peak) m.peak_family = peak_name(g.family);
      return m;
    }
  }
  // alloc.<device>.allocated_bytes / reserved_bytes (src/probes/allocator_probe.cpp)
  if (source == "alloc") {
    const std::size_t last = figure.rfind('.');
    if (last != std::string::npos) {
      const std::string device = figure.substr(0, last);
      const std::string what = figure.substr(last + 1);
      if (what == "allocated_bytes" || what == "reserved_bytes") {
        const bool allocated = what == "allocated_bytes";
        m.family = allocated ? "genscope_allocator_allocated_bytes" : "genscope_allocator_reserved_bytes";
        m.unit = "bytes";
        m.help = allocated ? "Memory allocated through the framework's allocator (e.g. PyTorch "
                             "memory_allocated), last sample."
                           : "Memory reserved by the framework's caching allocator (e.g. PyTorch "
                             "memory_reserved), last sample.";
        m.labels = {{"device", device}};
        m.peak_family = peak_name(m.family);
        return m;
      }
    }
  }
  if (source == "system") {
    if (figure == "total_bytes") {
      m.family = "genscope_system_memory_total_bytes";
      m.help = "Memory of the machine (/proc/meminfo MemTotal).";
    } else if (figure == "available_bytes") {
      m.family = "genscope_system_memory_available_bytes";
      m.help = "Memory available for new work (/proc/meminfo MemAvailable), last sample.";
    } else if (figure == "used_bytes") {
      m.family = "genscope_system_memory_used_bytes";
      m.help = "Memory in use on the machine (MemTotal - MemAvailable), last sample.";
      m.peak_family = "genscope_system_memory_used_peak_bytes";
    } else if (figure == "used_percent") {
      m.family = "genscope_system_memory_used_ratio";
      m.unit = "ratio";
      m.scale = 0.01;
      m.help = "Share of the machine's memory in use (0-1), last sample.";
      return m;
    }
    if (!m.family.empty()) {
      m.unit = "bytes";
      return m;
    }
  }
  if (figure == "rss_bytes" && !source.empty()) {
    const bool process = source == "process";
    const bool tree = source == "tree";
    const std::string what = process ? "the monitored process"
                             : tree  ? "the monitored process tree (genscope run/watch)"
                                     : "probe " + source;
    m.family = process ? "genscope_process_resident_memory_bytes"
               : tree  ? "genscope_process_tree_resident_memory_bytes"
                       : "genscope_" + lower_snake(source) + "_resident_memory_bytes";
    m.unit = "bytes";
    m.help = "Resident set size of " + what + ", last sample.";
    m.peak_family = peak_name(m.family);
    return m;
  }

  // Any other probe figure: genscope_<snake case of the dotted name>, with its unit suffix.
  std::string name = "genscope_" + lower_snake(column);
  auto suffix = [&](std::string_view s) {
    if (!ends_with(name, "_" + std::string(s))) name += "_" + std::string(s);
    m.unit = s;
  };
  switch (unit) {
    case Unit::kBytes:
      suffix("bytes");
      break;
    case Unit::kPercent:
      if (ends_with(name, "_percent")) name.resize(name.size() - 8);
      suffix("ratio");
      m.scale = 0.01;
      break;
    case Unit::kWatts:
      suffix("watts");
      break;
    case Unit::kCelsius:
      suffix("celsius");
      break;
    case Unit::kHertz:
      suffix("hertz");
      break;
    case Unit::kCount:
      for (std::string_view reserved : {"_total", "_count", "_sum", "_bucket", "_created", "_info"}) {
        if (ends_with(name, reserved)) name += "_value";
      }
      break;
  }
  m.family = name;
  m.help = "Probe figure " + column + " (" + std::string(to_string(unit)) + "), last sample.";
  return m;
}

// --- events --------------------------------------------------------------------------------

void MetricsModel::run_started(const Run& run) {
  has_run_ = true;
  active_ = true;
  start_unix_ns_ = run.start_unix_ns;
  duration_ns_ = 0;
  pipeline_ = run.pipeline;
  distributed_ = run.distributed;
  host_ = run.host.hostname;
  gpus_ = run.gpus;
  columns_.clear();
  for (std::size_t i = 0; i < run.series.metrics.size(); ++i) {
    const Unit unit = i < run.series.units.size() ? run.series.units[i] : Unit::kCount;
    columns_.push_back(map_column(run.series.metrics[i], unit));
  }
  values_.assign(columns_.size(), kNaN);
  peaks_.assign(columns_.size(), kNaN);
  open_.clear();
  run_errors_.clear();
  run_samples_ = 0;
}

void MetricsModel::step_began(const StepRecord& step) {
  OpenStep& s = open_[step.id];
  s.kind = step.kind;
  s.name = step.name;
  s.thread = step.thread;
  s.start_offset_ns = step.start_offset_ns;
}

void MetricsModel::iteration(int step_id, std::int64_t duration_ns) {
  auto it = open_.find(step_id);
  if (it == open_.end()) return;
  ++it->second.iterations;
  it->second.iteration_ns += duration_ns;
}

void MetricsModel::step_ended(const StepRecord& step) {
  open_.erase(step.id);
  const double duration = seconds(static_cast<double>(step.duration_ns));
  // Each moment counts once: durations and work counters add up over top-level steps only
  // (a nested step's time and work are inside its parent's, which usually sums them). Steps,
  // attempts and iterations are events marked on exactly one step: every step counts.
  const bool top_level = step.parent_id < 0;
  if (top_level) step_durations_[step.kind].observe(duration);
  steps_[{step.kind, step.status}] += 1;
  for (const Attempt& a : step.attempts) attempts_[{step.kind, a.strategy, a.outcome}] += 1;
  if (!step.iteration_ns.empty()) {
    DurationHistogram& h = iteration_durations_[step.kind];
    for (std::int64_t ns : step.iteration_ns) h.observe(seconds(static_cast<double>(ns)));
    iterations_[step.kind] += static_cast<double>(step.iteration_ns.size());
  }
  if (top_level) {
    for (const auto& [counter, value] : step.counters) work_[{step.kind, counter}] += value;
  }

  // Peaks: the step's exact (or sampled) peaks fold into the run's.
  std::vector<std::pair<std::string, double>> step_peaks;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].peak_family.empty()) continue;
    const MetricFigures* f = step.metric(columns_[i].column);
    if (f == nullptr || std::isnan(f->peak)) continue;
    peaks_[i] = std::isnan(peaks_[i]) ? f->peak : std::max(peaks_[i], f->peak);
    step_peaks.emplace_back(columns_[i].column, f->peak);
  }

  StepKey key{step.kind, step.name};
  auto it = last_steps_.find(key);
  if (it == last_steps_.end()) {
    if (last_steps_.size() >= kMaxStepNames) return;
    it = last_steps_.emplace(std::move(key), LastStep{}).first;
  }
  LastStep& last = it->second;
  last.duration_seconds = duration;
  last.iterations_per_second = step.iteration_ns.empty()
                                   ? kNaN
                                   : summarize_iterations(step.iteration_ns).iterations_per_second;
  last.peaks = std::move(step_peaks);
}

void MetricsModel::sample(std::span<const double> values) {
  ++samples_;
  ++run_samples_;
  const std::size_t n = std::min(values.size(), values_.size());
  for (std::size_t i = 0; i < n; ++i) {
    const double v = values[i];
    values_[i] = v;
    if (!std::isnan(v) && !columns_[i].peak_family.empty() && !(v <= peaks_[i])) peaks_[i] = v;
  }
}

void MetricsModel::monitoring_error(const MonitoringError& error) {
  errors_[error.source] += 1;
  ++run_errors_[error.source];
}

void MetricsModel::run_finished(const Run& run) {
  active_ = false;
  duration_ns_ = run.duration_ns;
  open_.clear();
  // The finished run is authoritative for what no live event carried (errors added by
  // finish(), samples dropped from a full queue).
  std::map<std::string, std::uint64_t> by_source;
  for (const MonitoringError& e : run.monitoring_errors) ++by_source[e.source];
  for (const auto& [source, n] : by_source) {
    const std::uint64_t seen = run_errors_[source];
    if (n > seen) errors_[source] += static_cast<double>(n - seen);
  }
  if (run.series.samples_taken > run_samples_) samples_ += run.series.samples_taken - run_samples_;
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    if (columns_[i].peak_family.empty()) continue;
    const double p = run.peak(columns_[i].column);
    if (!std::isnan(p) && !(p <= peaks_[i])) peaks_[i] = p;
  }
  bool failed = false;
  for (const StepRecord& s : run.steps) failed = failed || s.status == StepStatus::kFailed;
  runs_[failed ? "failed" : "ok"] += 1;
}

MetricsModel MetricsModel::from_run(const Run& run) {
  MetricsModel m;
  m.run_started(run);
  for (const StepRecord& s : run.steps) m.step_ended(s);
  const std::size_t width = run.series.metrics.size();
  if (width > 0 && run.series.values.size() >= run.series.size() * width) {
    for (std::size_t row = 0; row < run.series.size(); ++row) {
      m.sample(std::span<const double>(run.series.values).subspan(row * width, width));
    }
  }
  m.run_finished(run);
  return m;
}

// --- names ---------------------------------------------------------------------------------

std::vector<MetricFamily> MetricsModel::families(std::int64_t now_unix_ns) const {
  FamilyList out;
  constexpr auto kGauge = MetricType::kGauge;
  constexpr auto kCounter = MetricType::kCounter;

  out.add("genscope_build_info", kGauge, "", "Always 1; the genscope version as a label.",
          {{"version", version()}}, 1);
  if (has_run_) {
    LabelSet info{{"pipeline", pipeline_.name},
                  {"model", pipeline_.model},
                  {"architecture", pipeline_.architecture}};
    if (distributed_ && distributed_->role == "rank") {  // a fleet's ranks (docs/distributed.md)
      info.insert(info.end(), {{"host", host_},
                               {"rank", std::to_string(distributed_->rank)},
                               {"world_size", std::to_string(distributed_->world_size)},
                               {"group", distributed_->group}});
    }
    out.add("genscope_run_info", kGauge, "",
            "Always 1; what the current (or last) run runs, as labels.",
            std::move(info), 1);
    out.add("genscope_run_active", kGauge, "", "1 while a run is in progress, else 0.", {},
            active_ ? 1 : 0);
    out.add("genscope_run_start_time_seconds", kGauge, "seconds",
            "Start of the current (or last) run, Unix time.", {},
            static_cast<double>(start_unix_ns_) / 1e9);
    const double elapsed = active_ ? static_cast<double>(now_unix_ns - start_unix_ns_)
                                   : static_cast<double>(duration_ns_);
    out.add("genscope_run_duration_seconds", kGauge, "seconds",
            "Duration of the last run, or time elapsed in the current one.", {},
            seconds(std::max(0.0, elapsed)));
  }
  for (const auto& [status, n] : runs_) {
    out.add("genscope_runs", kCounter, "", "Runs finished, by status (failed: a step failed).",
            {{"status", status}}, n);
  }

  // The steps open now, outermost first per (kind, name, thread).
  {
    std::map<std::tuple<StepKind, std::string, int>, const OpenStep*> current;
    for (const auto& [id, s] : open_) current.emplace(std::make_tuple(s.kind, s.name, s.thread), &s);
    for (const auto& [key, s] : current) {
      const double start = static_cast<double>(start_unix_ns_ + s->start_offset_ns);
      out.add("genscope_current_step_elapsed_seconds", kGauge, "seconds",
              "Time since each step now in progress began; the step is in the labels.",
              {{"kind", kind_name(s->kind)}, {"step", s->name}, {"thread", std::to_string(s->thread)}},
              seconds(std::max(0.0, static_cast<double>(now_unix_ns) - start)));
    }
    for (const auto& [key, s] : current) {
      if (s->iterations == 0) continue;
      out.add("genscope_current_step_iterations", kGauge, "",
              "Iterations marked so far in each step now in progress.",
              {{"kind", kind_name(s->kind)}, {"step", s->name}, {"thread", std::to_string(s->thread)}},
              static_cast<double>(s->iterations));
    }
  }

  // Steps.
  if (MetricFamily* f = !step_durations_.empty()
                            ? out.get("genscope_step_duration_seconds", MetricType::kHistogram,
                                      "seconds", "Duration of finished steps, by step kind.")
                            : nullptr) {
    f->bounds.assign(kDurationBounds.begin(), kDurationBounds.end());
    for (const auto& [kind, h] : step_durations_) {
      MetricPoint& p = f->points.emplace_back();
      p.labels = {{"kind", kind_name(kind)}};
      p.cumulative = h.cumulative();
      p.count = h.count;
      p.sum = h.sum;
    }
  }
  for (const auto& [key, n] : steps_) {
    out.add("genscope_steps", kCounter, "", "Steps finished, by kind and status.",
            {{"kind", kind_name(key.first)}, {"status", std::string(to_string(key.second))}}, n);
  }
  for (const auto& [key, last] : last_steps_) {
    out.add("genscope_step_last_duration_seconds", kGauge, "seconds",
            "Duration of the latest finished step of each name.",
            {{"kind", kind_name(key.first)}, {"step", key.second}}, last.duration_seconds);
  }
  // One family per memory figure (one quantity per name): genscope_x_peak_bytes ->
  // genscope_step_last_x_peak_bytes, with the figure's own labels (gpu, device).
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    const ColumnMetric& c = columns_[i];
    if (c.peak_family.empty()) continue;
    const std::string family = "genscope_step_last_" + c.peak_family.substr(9);
    const std::string help = "Peak of " + c.family +
                             " during the latest finished step of each name (exact where the "
                             "probe has high-water marks).";
    for (const auto& [key, last] : last_steps_) {
      for (const auto& [column, peak] : last.peaks) {
        if (column != c.column) continue;
        LabelSet labels{{"kind", kind_name(key.first)}, {"step", key.second}};
        labels.insert(labels.end(), c.labels.begin(), c.labels.end());
        out.add(family, kGauge, "bytes", help, std::move(labels), peak);
      }
    }
  }
  for (const auto& [key, n] : attempts_) {
    out.add("genscope_step_attempts", kCounter, "",
            "Attempts of fallback chains, by step kind, strategy and outcome.",
            {{"kind", kind_name(std::get<0>(key))},
             {"strategy", std::get<1>(key)},
             {"outcome", std::string(to_string(std::get<2>(key)))}},
            n);
  }
  // One unit per name: byte counters (bytes, read_bytes, ...) apart from counts of things.
  for (const auto& [key, n] : work_) {
    const bool bytes = key.second == "bytes" || ends_with(key.second, "_bytes");
    if (bytes) {
      out.add("genscope_work_bytes", kCounter, "bytes",
              "Bytes counted by top-level steps (step counters named bytes or *_bytes), by kind.",
              {{"kind", kind_name(key.first)}, {"counter", key.second}}, n);
    }
  }
  for (const auto& [key, n] : work_) {
    const bool bytes = key.second == "bytes" || ends_with(key.second, "_bytes");
    if (!bytes) {
      out.add("genscope_work", kCounter, "",
              "Work counted by top-level steps (step counters: frames, tokens, ...), by kind.",
              {{"kind", kind_name(key.first)}, {"counter", key.second}}, n);
    }
  }

  // Iterations.
  for (const auto& [kind, n] : iterations_) {
    out.add("genscope_iterations", kCounter, "", "Iterations of finished steps, by step kind.",
            {{"kind", kind_name(kind)}}, n);
  }
  if (MetricFamily* f = !iteration_durations_.empty()
                            ? out.get("genscope_iteration_duration_seconds", MetricType::kHistogram,
                                      "seconds", "Duration of single iterations, by step kind.")
                            : nullptr) {
    f->bounds.assign(kDurationBounds.begin(), kDurationBounds.end());
    for (const auto& [kind, h] : iteration_durations_) {
      MetricPoint& p = f->points.emplace_back();
      p.labels = {{"kind", kind_name(kind)}};
      p.cumulative = h.cumulative();
      p.count = h.count;
      p.sum = h.sum;
    }
  }
  {
    // Open steps first (live rate), then the latest finished step of each other name.
    std::set<StepKey> seen;
    const char* help =
        "Iterations per second: so far in a step in progress, else over the latest finished "
        "step of that name.";
    for (const auto& [id, s] : open_) {
      if (s.iterations == 0 || s.iteration_ns <= 0 || !seen.insert({s.kind, s.name}).second) continue;
      out.add("genscope_iterations_per_second", kGauge, "", help,
              {{"kind", kind_name(s.kind)}, {"step", s.name}},
              static_cast<double>(s.iterations) / seconds(static_cast<double>(s.iteration_ns)));
    }
    for (const auto& [key, last] : last_steps_) {
      if (std::isnan(last.iterations_per_second) || seen.count(key) > 0) continue;
      out.add("genscope_iterations_per_second", kGauge, "", help,
              {{"kind", kind_name(key.first)}, {"step", key.second}}, last.iterations_per_second);
    }
  }

  // Probe figures: last sample and the run's peak.
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    const ColumnMetric& c = columns_[i];
    out.add(c.family, kGauge, c.unit, c.help, c.labels, values_[i] * c.scale, true);
  }
  for (std::size_t i = 0; i < columns_.size(); ++i) {
    const ColumnMetric& c = columns_[i];
    if (c.peak_family.empty()) continue;
    out.add(c.peak_family, kGauge, "bytes",
            "Highest value in the current (or last) run of " + c.family +
                " (exact step peaks where the probe has high-water marks, else samples).",
            c.labels, peaks_[i], true);
  }
  for (const GpuInfo& g : gpus_) {
    out.add("genscope_gpu_info", kGauge, "", "Always 1; each GPU's name, UUID and driver as labels.",
            {{"gpu", std::to_string(g.index)},
             {"name", g.name},
             {"uuid", g.uuid},
             {"driver_version", g.driver_version}},
            1, true);
  }

  // Monitoring itself.
  for (const auto& [source, n] : errors_) {
    out.add("genscope_monitoring_errors", kCounter, "",
            "Monitoring failures (probes, analyses, sinks), by source; never the pipeline's.",
            {{"source", source}}, n);
  }
  if (has_run_) {
    out.add("genscope_samples", kCounter, "", "Rows taken by the background sampler.", {},
            static_cast<double>(samples_));
  }
  return out.take();
}

}  // namespace genscope::detail

namespace genscope {

std::string render_metrics(const Run& run, MetricsFormat format) {
  const detail::MetricsModel model = detail::MetricsModel::from_run(run);
  return detail::write_exposition(model.families(run.start_unix_ns + run.duration_ns), format);
}

}  // namespace genscope
