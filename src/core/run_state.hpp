// Internal state shared by Monitor, ActiveRun, Step and the sampler thread.
//
// Locking: RunState::mutex guards everything in RunState and in every StepState except the
// iteration clock and durations, which only the step's own thread touches. Each ProbeSlot
// serialises its own calls. Order: never call a probe while holding RunState::mutex.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/probe_slot.hpp"
#include "core/sink_dispatcher.hpp"
#include "core/time_series_buffer.hpp"
#include "genscope/monitor.hpp"
#include "genscope/run.hpp"

namespace genscope::detail {

std::int64_t steady_now_ns() noexcept;

/// One open or finished step.
struct StepState {
  StepRecord record;
  std::int64_t start_ns = 0;          // steady clock
  std::vector<double> before;         // per run metric
  std::vector<double> sampled_peak;   // max of sampled values (incl. before/after)
  std::vector<std::int64_t> sampled_peak_offset_ns;
  std::vector<double> exact_peak;     // folded high-water marks; NaN when none
  std::vector<char> exact_valid;      // the high-water mark was reset at this step's start
                                      // and every window since had a known exact peak
  std::map<std::string, FigurePart> parts;  // per-item maxima, keyed by metric + '\n' + key
  bool open = true;
  int samples = 0;                    // sampler rows taken while open
  std::vector<MetricFigures> extra_metrics;  // Step::add_metric(), listed after the probes'
  // Owner-thread only:
  std::int64_t last_iteration_ns = 0;
  std::vector<std::int64_t> iterations;
  bool iterations_inferred = false;
};

/// A probe as used by one run: its slot and where its metrics sit in the run's columns.
struct RunProbe {
  std::shared_ptr<ProbeSlot> slot;
  std::size_t first = 0;  // first column
  std::size_t count = 0;
  bool exact = false;     // has exact-peak metrics
  bool parts = false;     // reports per-item parts (Probe::read_parts)
  bool reset_refused_noted = false;
  // The sampler's reading schedule (ProbeSlot::series_period); sampler thread only.
  std::int64_t period_ns = 0;
  std::int64_t last_read_ns = 0;
  bool read_yet = false;
  std::vector<double> held;  // the last reading, repeated in the rows in between
};

struct MonitorState;

struct RunState {
  std::shared_ptr<MonitorState> monitor;
  std::mutex mutex;
  // Serialises "fold the high-water marks into the open steps, reset them, register a step"
  // (and the fold at a step's end) across threads. Order: peak_mutex, then a probe's own
  // lock, then `mutex`; the sampler never takes it.
  std::mutex peak_mutex;
  Run run;
  TensorDumpOptions dumps;
  std::int64_t start_steady_ns = 0;
  std::vector<RunProbe> probes;
  std::vector<MetricInfo> columns;
  TimeSeriesBuffer series;
  std::vector<std::unique_ptr<StepState>> steps;
  std::vector<StepState*> open_steps;
  std::map<std::thread::id, int> thread_numbers;
  std::map<std::pair<std::string, std::string>, int> error_counts;
  std::map<std::string, std::size_t> distinct_errors;  // per source (add_error_locked's bound)
  static constexpr std::size_t kMaxDistinctErrors = 20;
  static constexpr std::size_t kMaxErrorMessageBytes = 512;
  std::atomic<int> open_count{0};
  bool finished = false;
  // Steady time of the newest series row (the sampler's or a step boundary's): the sampler
  // counts its next interval from it.
  std::atomic<std::int64_t> last_row_ns{0};
  // Live events: the monitor's dispatcher and the event groups its sinks want (fixed for the
  // run; 0 = no sink, nothing is queued).
  std::shared_ptr<SinkDispatcher> sinks;
  unsigned sink_mask = 0;

  bool wants(unsigned group) const noexcept { return (sink_mask & group) != 0; }

  RunState(std::size_t columns, std::size_t capacity) : series(columns, capacity) {}

  /// Records a monitoring error once per distinct (source, message); repeats are counted.
  /// Caller holds `mutex`.
  void add_error_locked(std::string_view source, std::string_view message, std::string step);
  /// Samples one probe into `out`; records a failure. Lock not held.
  void sample_probe(RunProbe& p, std::span<double> out);
  /// Samples every probe into `row` (size columns.size()); records failures. Lock not held.
  void sample_all(std::vector<double>& row);
  /// The sampler's row at `now_ns`: like sample_all, except that a probe with a series
  /// period read less than a period ago (less half an `interval_ns` of timer jitter)
  /// repeats its last reading; `fresh` marks the columns read now. Sampler thread only.
  void sample_series_row(std::vector<double>& row, std::vector<char>& fresh,
                         std::int64_t now_ns, std::int64_t interval_ns);
  /// Reads exact peaks of every exact probe and folds them into all open steps.
  /// Lock not held on entry.
  void fold_exact_peaks();
  /// Reads the per-item parts of every probe that has them and folds them into all open
  /// steps (parts seen while no step is open are dropped). Lock not held on entry.
  void fold_parts();
  /// Updates sampled peaks of all open steps with the `fresh` columns of a row taken at
  /// `now_ns` (a repeated reading may predate the step). Caller holds mutex.
  void update_sampled_peaks_locked(const std::vector<double>& row, const std::vector<char>& fresh,
                                   std::int64_t now_ns);
  /// Appends a row read at `now_ns` to the series — the sampler's, or a step boundary's own
  /// readings (its before or after figures: the timeline has a point at every boundary, and
  /// the sampler counts its next interval from it) — and posts it to the sinks. Skipped (false)
  /// when the run has finished, the row has the wrong width, or a newer row is already
  /// stored. Moves no step's sampled peak or sample count. Caller holds mutex.
  bool push_row_locked(const std::vector<double>& row, std::int64_t now_ns);
  /// Converts a step's state into its finished record. Caller holds mutex.
  void finalize_locked(StepState& step, const std::vector<double>& after, std::int64_t end_ns);
  /// Adds the step's per-item parts as "figure_parts" attachments. Caller holds mutex.
  void attach_parts_locked(StepState& step);
  /// Figures of every column over [start, end] (steady clock) from the stored samples, for
  /// a step timed elsewhere (ActiveRun::add_step). Caller holds mutex.
  std::vector<MetricFigures> sampled_figures_locked(std::int64_t start_ns,
                                                    std::int64_t end_ns) const;
  /// Small per-run number of the calling thread. Caller holds mutex.
  int thread_number_locked();
  /// The run recorded so far. Caller holds mutex.
  Run snapshot_locked() const;
  /// The finished run's document, its parts moved out instead of copied (finish() only:
  /// nothing reads them afterwards; the id stays for late messages). No new allocation for
  /// the steps' attachments, which with the process's heap shrunk by a framework's frees
  /// costs fresh (huge) pages.
  Run take_finished_locked();
  /// The series and the counted monitoring errors of `out`, from this state.
  void complete_locked(Run& out) const;
};

/// Monitor-wide state: probes, options, the sampler thread and the active run.
struct MonitorState {
  MonitorOptions options;
  std::atomic<bool> enabled{true};
  std::mutex mutex;  // guards probes, active_run, sampler control
  std::vector<std::shared_ptr<ProbeSlot>> probes;
  std::weak_ptr<RunState> active_run;
  // A start_run() between its check and publishing its run: a second one fails meanwhile.
  bool run_starting = false;
  std::vector<std::shared_ptr<Sink>> sink_list;  // registered sinks (options + add_sink)
  std::shared_ptr<SinkDispatcher> dispatcher;    // created with the first run that has sinks
  UsageTracker usage;  // across the runs this monitor finished
  // The machine (hostname, CPU model from /proc/cpuinfo, RAM, OS), read at the first run and
  // given to every later one: reading /proc/cpuinfo costs more than the rest of start_run.
  std::once_flag host_once;
  HostInfo host;

  // Sampler
  std::thread sampler;
  std::condition_variable sampler_cv;
  bool sampler_stop = false;
  std::shared_ptr<RunState> sampled_run;  // the run the sampler feeds, null when idle
  // Adaptive cadence: bumped at every step boundary; the sampler returns to the fast
  // interval when it sees a new value.
  std::atomic<std::uint64_t> sampler_events{0};
  // Whether the sampler's current wait is longer than the fast interval: only then does a
  // boundary wake it (a futex call and a context switch); a sampler already at the fast
  // interval sees the new event count at its next tick.
  std::atomic<bool> sampler_waits_long{false};

  void start_sampler(std::shared_ptr<RunState> run);
  /// A step began or ended: sample at the fast interval again (never blocks).
  void wake_sampler() noexcept;
  void stop_sampler();
  void sampler_loop();
};

}  // namespace genscope::detail
