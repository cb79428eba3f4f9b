// Even spreading of a progress interval over the iterations it covered.
#include "watch/progress_iterations.hpp"

#include <algorithm>

namespace genscope::watch {

namespace {
// A bar that claims millions of iterations in one redraw is not stored one by one beyond
// this (memory bound); the count is still right up to it.
constexpr std::int64_t kMaxIterationsPerReading = 1'000'000;
}  // namespace

void spread_evenly(std::int64_t total_ns, std::int64_t count, std::vector<std::int64_t>& out) {
  out.clear();
  if (count <= 0) return;
  count = std::min(count, kMaxIterationsPerReading);
  total_ns = std::max<std::int64_t>(0, total_ns);
  const std::int64_t each = total_ns / count;
  out.assign(static_cast<std::size_t>(count), each);
  out.back() += total_ns - each * count;
}

void ProgressIterations::advance(std::int64_t n, std::int64_t steady_ns,
                                 std::vector<std::int64_t>& out, bool& inferred) {
  out.clear();
  inferred = false;
  if (!started_) {
    start(n, steady_ns);
    return;
  }
  if (n <= last_n_) return;
  const std::int64_t count = n - last_n_;
  spread_evenly(steady_ns - last_ns_, count, out);
  inferred = count > 1;
  last_n_ = n;
  last_ns_ = steady_ns;
}

}  // namespace genscope::watch
