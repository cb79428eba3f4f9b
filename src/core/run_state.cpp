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

bool RunState::push_row_locked(const std::vector<double>& row, std::int64_t now_ns) {
  if (finished || row.size() != columns.size()) return false;
  const std::int64_t offset = now_ns - start_steady_ns;
  if (series.size() > 0 && offset < series.times().back()) return false;
  series.push(offset, row);
  last_row_ns.store(now_ns, std::memory_order_relaxed);
  if (wants(Sink::kSampleEvents)) sinks->post(SampleEvent{offset, row});
  return true;
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
  complete_locked(copy);
  return copy;
}

Run RunState::take_finished_locked() {
  Run out = std::move(run);
  run = Run{};
  run.id = out.id;
  out.steps.clear();
  out.steps.reserve(steps.size());
  for (const auto& s : steps) out.steps.push_back(std::move(s->record));
  complete_locked(out);
  return out;
}

void RunState::complete_locked(Run& out) const {
  out.series.metrics.clear();
  out.series.units.clear();
  for (const MetricInfo& m : columns) {
    out.series.metrics.push_back(m.name);
    out.series.units.push_back(m.unit);
  }
  out.series.offset_ns = series.times();
  out.series.values = series.values();
  out.series.samples_taken = series.pushed();
  out.series.capacity = series.capacity();
  for (MonitoringError& e : out.monitoring_errors) {
    const auto it = error_counts.find({e.source, e.message});
    if (it != error_counts.end() && it->second > 1) {
      e.message += " (repeated " + std::to_string(it->second) + " times)";
    }
  }
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
  // Sequentially consistent with the sampler's store of sampler_waits_long before it reads
  // the count: either it sees this event before sleeping or this sees its long wait.
  sampler_events.fetch_add(1);
  if (sampler_waits_long.load()) sampler_cv.notify_all();
}

namespace {

// The range each column has taken since the last step boundary. A sample "changes" when a
// column leaves it by more than 2 % (memory growing past anything seen, a GPU filling up, a
// drop below the lowest reading); a column swinging inside it — a denoising loop allocating
// and freeing the same activations every iteration — is steady, so the sampler slows down
// while the exact per-step peaks (high-water marks) keep every top.
class Envelope {
 public:
  void reset() {
    lo_.clear();
    hi_.clear();
  }

  /// Starts the range at one row (a step boundary's readings).
  void reset_to(std::span<const double> row) {
    lo_.assign(row.begin(), row.end());
    hi_.assign(row.begin(), row.end());
  }

  bool widened_by(const std::vector<double>& row) {
    if (lo_.size() != row.size()) {
      reset_to(row);
      return true;
    }
    bool changed = false;
    for (std::size_t c = 0; c < row.size(); ++c) {
      const double v = row[c];
      if (std::isnan(v)) continue;
      if (std::isnan(lo_[c])) {
        lo_[c] = hi_[c] = v;
        changed = true;
        continue;
      }
      // Leaving or reaching zero counts too: |0| gives the range no margin.
      if (v > hi_[c] + 0.02 * std::fabs(hi_[c]) || v < lo_[c] - 0.02 * std::fabs(lo_[c])) {
        changed = true;
      }
      lo_[c] = std::min(lo_[c], v);
      hi_[c] = std::max(hi_[c], v);
    }
    return changed;
  }

 private:
  std::vector<double> lo_, hi_;
};

}  // namespace

// The cadence: `fast` after a step boundary (wake_sampler) and while samples leave the range
// seen since the last boundary (Envelope); each steady sample doubles the interval up to
// `slow`. Intervals count from the newest row, the sampler's or a boundary's. A boundary that
// arrives during a long wait wakes the sampler, which then samples `fast` after the newest row
// (at once if that moment has passed); one that arrives during a fast wait is seen at its end.
void MonitorState::sampler_loop() {
  const auto fast = std::max(options.sample_interval, std::chrono::microseconds(1000));
  const auto slow = std::max(options.max_sample_interval, fast);
  const std::int64_t interval_ns = std::chrono::nanoseconds(fast).count();
  std::vector<double> row;
  Envelope envelope;
  std::vector<char> fresh;
  auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(fast);
  auto last = std::chrono::steady_clock::now();
  std::uint64_t seen_events = sampler_events.load(std::memory_order_relaxed);
  // The newest row of the run sampled now (caller holds `mutex`, sampled_run is set).
  const auto newest_row = [&] {
    return std::max(last, std::chrono::steady_clock::time_point(std::chrono::nanoseconds(
                              sampled_run->last_row_ns.load(std::memory_order_relaxed))));
  };
  std::unique_lock lock(mutex);
  for (;;) {
    if (sampler_stop) return;
    if (sampled_run == nullptr) {
      sampler_cv.wait(lock, [&] { return sampler_stop || sampled_run != nullptr; });
      last = std::chrono::steady_clock::now();
      interval = fast;
      envelope.reset();
      continue;
    }
    auto next = newest_row() + interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + interval;  // fell behind: skip, never burst
    sampler_waits_long.store(next - now > fast);
    const bool stopped = sampler_cv.wait_until(lock, next, [&] {
      return sampler_stop || sampler_events.load() != seen_events;
    });
    if (sampler_stop) return;
    if (sampled_run == nullptr) continue;  // the run finished during the wait
    if (stopped) {  // a step boundary: back to the fast interval, counted from the last row
      seen_events = sampler_events.load(std::memory_order_relaxed);
      interval = fast;
      // The range starts again at the boundary's own readings (the newest row).
      std::lock_guard run_lock(sampled_run->mutex);
      const TimeSeriesBuffer& series = sampled_run->series;
      const std::size_t n = series.columns();
      if (series.size() > 0 && n > 0) {
        envelope.reset_to(std::span<const double>(series.values()).last(n));
      } else {
        envelope.reset();
      }
    }
    // Not due yet when a boundary row came during the wait, or the wait was cut short.
    if (newest_row() + interval > std::chrono::steady_clock::now()) continue;
    std::shared_ptr<RunState> run = sampled_run;
    lock.unlock();
    last = std::chrono::steady_clock::now();
    run->sample_series_row(row, fresh, steady_now_ns(), interval_ns);
    const std::int64_t t = steady_now_ns();
    const bool changed = envelope.widened_by(row);
    {
      std::lock_guard run_lock(run->mutex);
      // A boundary row stored while this one was read is newer: this one is dropped.
      if (run->push_row_locked(row, t)) {
        run->update_sampled_peaks_locked(row, fresh, t);
        for (StepState* s : run->open_steps) ++s->samples;
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
