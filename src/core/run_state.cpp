// RunState: probe sampling, peak folding and step finalisation shared by steps and sampler.
#include "core/run_state.hpp"

#include "genscope/step_tree.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace genscope::detail {

std::int64_t steady_now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void RunState::add_error_locked(std::string_view source, std::string_view message,
                                std::string step) {
  // Bounded whatever the input (10 M distinct malformed event lines): each message is cut at
  // kMaxErrorMessageBytes, each source keeps its first kMaxDistinctErrors distinct messages,
  // and every further distinct one is only counted, under one message.
  std::string text(message.substr(0, kMaxErrorMessageBytes));
  if (message.size() > kMaxErrorMessageBytes) text += "... (" + std::to_string(message.size()) + " bytes)";
  auto key = std::make_pair(std::string(source), std::move(text));
  if (auto it = error_counts.find(key); it != error_counts.end()) {
    ++it->second;
    return;
  }
  if (++distinct_errors[key.first] > kMaxDistinctErrors) {
    key.second = "further distinct errors (beyond the first " + std::to_string(kMaxDistinctErrors) +
                 " of this source) are counted here, not kept";
    if (error_counts[key]++ > 0) return;
  } else {
    error_counts[key] = 1;
  }
  MonitoringError e;
  e.source = key.first;
  e.message = key.second;
  e.offset_ns = steady_now_ns() - start_steady_ns;
  e.step = std::move(step);
  if (wants(Sink::kErrorEvents)) sinks->post(ErrorEvent{e});
  run.monitoring_errors.push_back(std::move(e));
}

void RunState::sample_probe(RunProbe& p, std::span<double> out) {
  const ProbeStatus status = p.slot->sample(out);
  if (!status.ok()) {
    std::lock_guard lock(mutex);
    add_error_locked(p.slot->name(), status.error, {});
  }
}

void RunState::sample_all(std::vector<double>& row) {
  row.assign(columns.size(), kNaN);
  for (RunProbe& p : probes) sample_probe(p, std::span<double>(row.data() + p.first, p.count));
}

void RunState::sample_series_row(std::vector<double>& row, std::vector<char>& fresh,
                                 std::int64_t now_ns, std::int64_t interval_ns) {
  row.assign(columns.size(), kNaN);
  fresh.assign(columns.size(), 1);
  for (RunProbe& p : probes) {
    const std::span<double> out(row.data() + p.first, p.count);
    if (p.period_ns > 0 && p.read_yet && now_ns - p.last_read_ns < p.period_ns - interval_ns / 2) {
      std::copy(p.held.begin(), p.held.end(), out.begin());
      std::fill_n(fresh.begin() + static_cast<std::ptrdiff_t>(p.first), p.count, 0);
      continue;
    }
    sample_probe(p, out);
    if (p.period_ns > 0) {
      p.held.assign(out.begin(), out.end());
      p.last_read_ns = now_ns;
      p.read_yet = true;
    }
  }
}

void RunState::fold_exact_peaks() {
  std::vector<double> peaks;
  for (RunProbe& p : probes) {
    if (!p.exact) continue;
    peaks.assign(p.count, kNaN);
    const ProbeStatus status = p.slot->read_peaks(peaks);
    std::lock_guard lock(mutex);
    if (!status.ok()) add_error_locked(p.slot->name(), status.error, {});
    for (StepState* s : open_steps) {
      for (std::size_t i = 0; i < p.count; ++i) {
        const std::size_t c = p.first + i;
        if (!s->exact_valid[c]) continue;
        const double v = status.ok() ? peaks[i] : kNaN;
        // A window whose exact peak is unknown leaves the step with its sampled peak.
        if (std::isnan(v)) {
          s->exact_valid[c] = 0;
        } else if (std::isnan(s->exact_peak[c]) || v > s->exact_peak[c]) {
          s->exact_peak[c] = v;
        }
      }
    }
  }
}

void RunState::fold_parts() {
  std::vector<FigurePart> parts;
  for (RunProbe& p : probes) {
    if (!p.parts) continue;
    const ProbeStatus status = p.slot->read_parts(parts);
    std::lock_guard lock(mutex);
    if (!status.ok()) add_error_locked(p.slot->name(), status.error, {});
    for (const FigurePart& part : parts) {
      if (std::isnan(part.peak)) continue;
      const std::string key = part.metric + '\n' + part.key;
      for (StepState* s : open_steps) {
        auto [it, inserted] = s->parts.try_emplace(key, part);
        if (inserted) continue;
        FigurePart& kept = it->second;
        if (std::isnan(kept.peak) || part.peak > kept.peak) kept.peak = part.peak;
        kept.exact = kept.exact && part.exact;
        if (!part.info.is_null()) kept.info = part.info;
      }
    }
  }
}

void RunState::update_sampled_peaks_locked(const std::vector<double>& row,
                                           const std::vector<char>& fresh, std::int64_t now_ns) {
  for (StepState* s : open_steps) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      const double v = row[c];
      if (std::isnan(v) || !fresh[c]) continue;
      if (std::isnan(s->sampled_peak[c]) || v > s->sampled_peak[c]) {
        s->sampled_peak[c] = v;
        s->sampled_peak_offset_ns[c] = std::max<std::int64_t>(0, now_ns - s->start_ns);
      }
    }
  }
}

void RunState::finalize_locked(StepState& step, const std::vector<double>& after,
                               std::int64_t end_ns) {
  StepRecord& r = step.record;
  r.duration_ns = std::max<std::int64_t>(0, end_ns - step.start_ns);
  if (r.status == StepStatus::kRunning) r.status = StepStatus::kOk;
  if (r.closed_by.empty()) r.closed_by = kClosedExplicit;
  r.metrics.clear();
  r.metrics.reserve(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) {
    MetricFigures m;
    m.name = columns[c].name;
    m.unit = columns[c].unit;
    m.before = step.before[c];
    m.after = c < after.size() ? after[c] : kNaN;
    double sampled = step.sampled_peak[c];
    std::int64_t sampled_at = step.sampled_peak_offset_ns[c];
    if (!std::isnan(m.after) && (std::isnan(sampled) || m.after > sampled)) {
      sampled = m.after;
      sampled_at = r.duration_ns;
    }
    const bool exact =
        columns[c].exact_peak && step.exact_valid[c] && !std::isnan(step.exact_peak[c]);
    if (exact) {
      m.peak = std::max(step.exact_peak[c], std::isnan(sampled) ? step.exact_peak[c] : sampled);
      m.peak_source = "exact";
      // The high-water mark has no timestamp: use the sampler's time when it saw (almost) the
      // same value, else leave the time unknown (a spike shorter than the sampling interval).
      const double tolerance = std::max(64.0 * 1024.0, 0.005 * m.peak);
      m.peak_offset_ns = (!std::isnan(sampled) && m.peak - sampled <= tolerance) ? sampled_at : -1;
    } else {
      m.peak = sampled;
      m.peak_offset_ns = std::isnan(sampled) ? -1 : sampled_at;
      m.peak_source = step.samples > 0 ? "sampled" : "endpoints";
    }
    r.metrics.push_back(std::move(m));
  }
  for (MetricFigures& m : step.extra_metrics) r.metrics.push_back(std::move(m));
  step.extra_metrics.clear();
  attach_parts_locked(step);
}

void RunState::attach_parts_locked(StepState& step) {
  if (step.parts.empty()) return;
  // One attachment per detailed column, items by decreasing peak.
  std::map<std::string, std::vector<const FigurePart*>> by_metric;
  for (const auto& [key, part] : step.parts) by_metric[part.metric].push_back(&part);
  for (auto& [metric, parts] : by_metric) {
    std::stable_sort(parts.begin(), parts.end(),
                     [](const FigurePart* a, const FigurePart* b) { return a->peak > b->peak; });
    Unit unit = Unit::kBytes;
    for (const MetricInfo& c : columns) {
      if (c.name == metric) unit = c.unit;
    }
    nlohmann::json items = nlohmann::json::array();
    for (const FigurePart* part : parts) {
      nlohmann::json item = part->info.is_object() ? part->info : nlohmann::json::object();
      item["peak"] = part->peak;
      item["peak_source"] = part->exact ? "exact" : "sampled";
      items.push_back(std::move(item));
    }
    step.record.attachments.push_back(
        {"figure_parts", metric,
         {{"metric", metric}, {"unit", std::string(to_string(unit))}, {"parts", std::move(items)}}});
  }
  step.parts.clear();
}

std::vector<MetricFigures> RunState::sampled_figures_locked(std::int64_t start_ns,
                                                            std::int64_t end_ns) const {
  // The samples are sorted by time; before = the last sample at or before the start (else
  // the first inside), after = the last sample at or before the end, peak = the maximum of
  // the samples inside and both ends.
  const std::vector<std::int64_t>& times = series.times();
  const std::vector<double>& values = series.values();
  const std::size_t n = columns.size();
  const std::int64_t from = start_ns - start_steady_ns;
  const std::int64_t to = end_ns - start_steady_ns;
  const auto first_inside = std::lower_bound(times.begin(), times.end(), from);
  const auto past_end = std::upper_bound(times.begin(), times.end(), to);
  const std::size_t lo = static_cast<std::size_t>(first_inside - times.begin());
  const std::size_t hi = static_cast<std::size_t>(past_end - times.begin());
  std::vector<MetricFigures> out;
  out.reserve(n);
  for (std::size_t c = 0; c < n; ++c) {
    MetricFigures m;
    m.name = columns[c].name;
    m.unit = columns[c].unit;
    if (lo > 0 && lo - 1 < times.size()) {
      m.before = values[(lo - 1) * n + c];
    } else if (lo < hi) {
      m.before = values[lo * n + c];
    }
    if (hi > 0) m.after = values[(hi - 1) * n + c];
    double peak = kNaN;
    std::int64_t peak_at = -1;
    for (std::size_t i = lo; i < hi; ++i) {
      const double v = values[i * n + c];
      if (!std::isnan(v) && (std::isnan(peak) || v > peak)) {
        peak = v;
        peak_at = std::max<std::int64_t>(0, times[i] - from);
      }
    }
    m.peak_source = lo < hi ? "sampled" : "endpoints";
    for (const double end_value : {m.before, m.after}) {
      if (!std::isnan(end_value) && (std::isnan(peak) || end_value > peak)) {
        peak = end_value;
        peak_at = -1;
      }
    }
    m.peak = peak;
    m.peak_offset_ns = peak_at;
    out.push_back(std::move(m));
  }
  return out;
}

int RunState::thread_number_locked() {
  const auto id = std::this_thread::get_id();
  auto it = thread_numbers.find(id);
  if (it != thread_numbers.end()) return it->second;
  const int n = static_cast<int>(thread_numbers.size());
  thread_numbers.emplace(id, n);
  return n;
}

Run RunState::snapshot_locked() const {
  Run copy = run;
  copy.steps.clear();
  copy.steps.reserve(steps.size());
  for (const auto& s : steps) copy.steps.push_back(s->record);
  copy.series.metrics.clear();
  copy.series.units.clear();
  for (const MetricInfo& m : columns) {
    copy.series.metrics.push_back(m.name);
    copy.series.units.push_back(m.unit);
  }
  copy.series.offset_ns = series.times();
  copy.series.values = series.values();
  copy.series.samples_taken = series.pushed();
  copy.series.capacity = series.capacity();
  for (MonitoringError& e : copy.monitoring_errors) {
    const auto it = error_counts.find({e.source, e.message});
    if (it != error_counts.end() && it->second > 1) {
      e.message += " (repeated " + std::to_string(it->second) + " times)";
    }
  }
  return copy;
}

// --- sampler ------------------------------------------------------------------------------

void MonitorState::start_sampler(std::shared_ptr<RunState> run) {
  std::lock_guard lock(mutex);
  sampled_run = std::move(run);
  if (!sampler.joinable()) sampler = std::thread([this] { sampler_loop(); });
  sampler_cv.notify_all();
}

void MonitorState::stop_sampler() {
  {
    std::lock_guard lock(mutex);
    sampler_stop = true;
    sampled_run = nullptr;
    sampler_cv.notify_all();
  }
  if (sampler.joinable()) sampler.join();
}

void MonitorState::wake_sampler() noexcept {
  if (options.max_sample_interval <= options.sample_interval) return;  // fixed cadence
  sampler_events.fetch_add(1, std::memory_order_relaxed);
  sampler_cv.notify_all();
}

namespace {

// A sample "changes" when a column moved by more than 2 % of its previous value (or left or
// reached zero): memory being allocated or freed, a GPU filling up.
bool row_changed(const std::vector<double>& prev, const std::vector<double>& row) {
  if (prev.size() != row.size()) return true;
  for (std::size_t c = 0; c < row.size(); ++c) {
    const double a = prev[c];
    const double b = row[c];
    if (std::isnan(a) || std::isnan(b)) continue;
    if (std::fabs(b - a) > 0.02 * std::max(std::fabs(a), std::fabs(b))) return true;
  }
  return false;
}

}  // namespace

// The cadence: `fast` after a step boundary (wake_sampler) and while samples change; each
// quiet sample doubles the interval up to `slow`. A boundary that arrives during a long wait
// wakes the sampler, which then samples `fast` after its previous sample (at once if that
// moment has passed).
void MonitorState::sampler_loop() {
  const auto fast = std::max(options.sample_interval, std::chrono::microseconds(1000));
  const auto slow = std::max(options.max_sample_interval, fast);
  const std::int64_t interval_ns = std::chrono::nanoseconds(fast).count();
  std::vector<double> row;
  std::vector<double> prev;
  std::vector<char> fresh;
  auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(fast);
  auto last = std::chrono::steady_clock::now();
  std::uint64_t seen_events = sampler_events.load(std::memory_order_relaxed);
  std::unique_lock lock(mutex);
  for (;;) {
    if (sampler_stop) return;
    if (sampled_run == nullptr) {
      sampler_cv.wait(lock, [&] { return sampler_stop || sampled_run != nullptr; });
      last = std::chrono::steady_clock::now();
      interval = fast;
      prev.clear();
      continue;
    }
    auto next = last + interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + interval;  // fell behind: skip, never burst
    const bool stopped = sampler_cv.wait_until(lock, next, [&] {
      return sampler_stop || sampler_events.load(std::memory_order_relaxed) != seen_events;
    });
    if (sampler_stop) return;
    if (stopped) {  // a step boundary: back to the fast interval, counted from the last sample
      seen_events = sampler_events.load(std::memory_order_relaxed);
      if (interval > fast) {
        interval = fast;
        if (last + interval > std::chrono::steady_clock::now()) continue;
      }
    }
    std::shared_ptr<RunState> run = sampled_run;
    if (run == nullptr) continue;
    lock.unlock();
    last = std::chrono::steady_clock::now();
    run->sample_series_row(row, fresh, steady_now_ns(), interval_ns);
    const std::int64_t t = steady_now_ns();
    const bool changed = row_changed(prev, row);
    prev = row;
    {
      std::lock_guard run_lock(run->mutex);
      if (!run->finished) {
        run->series.push(t - run->start_steady_ns, row);
        run->update_sampled_peaks_locked(row, fresh, t);
        for (StepState* s : run->open_steps) ++s->samples;
        if (run->wants(Sink::kSampleEvents)) {
          run->sinks->post(SampleEvent{t - run->start_steady_ns, row});
        }
      }
    }
    lock.lock();
    if (changed) {
      interval = fast;
    } else if (interval < slow) {
      interval = std::min<std::chrono::steady_clock::duration>(interval * 2, slow);
    }
  }
}

}  // namespace genscope::detail
