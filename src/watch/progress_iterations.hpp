// ProgressIterations: turns "n of total done" readings into per-iteration durations.
//
// A progress display (tqdm, a rule's n/total capture) reports a position, not iterations.
// Between two readings at t0 (position n0) and t1 (position n1) there were n1 - n0
// iterations: when that is 1, its duration t1 - t0 is observed; when it is more (tqdm
// redraws at most every 0.1 s), the elapsed time is spread evenly over them and the
// durations are marked inferred. Times are the steady-clock times at which the readings
// were read, as given by the caller.
#pragma once

#include <cstdint>
#include <vector>

namespace genscope::watch {

/// Iterations derived from successive progress positions.
class ProgressIterations {
 public:
  /// Starts at position `n` read at `steady_ns`.
  void start(std::int64_t n, std::int64_t steady_ns) noexcept {
    last_n_ = n;
    last_ns_ = steady_ns;
    started_ = true;
  }
  bool started() const noexcept { return started_; }
  std::int64_t position() const noexcept { return last_n_; }
  /// The reading `n` at `steady_ns`: appends one duration per new iteration to `out`
  /// (cleared first); `inferred` is set when more than one iteration shared the interval.
  /// A position that did not advance gives nothing.
  void advance(std::int64_t n, std::int64_t steady_ns, std::vector<std::int64_t>& out,
               bool& inferred);

 private:
  std::int64_t last_n_ = 0;
  std::int64_t last_ns_ = 0;
  bool started_ = false;
};

/// `count` durations that sum exactly to `total_ns` (the remainder goes to the last).
void spread_evenly(std::int64_t total_ns, std::int64_t count, std::vector<std::int64_t>& out);

}  // namespace genscope::watch
