// compute_stats: validation, threading, hashing and the final figures.
#include "genscope/tensor_stats.hpp"

#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "genscope/error.hpp"
#include "tensor/element.hpp"
#include "tensor/hash.hpp"
#include "tensor/moments.hpp"
#include "tensor/validate.hpp"

namespace genscope {
namespace {

// Elements per fused run on one thread: stats then hash while the run is still in cache.
constexpr std::int64_t kFusedRunBytes = 256 << 10;

// Stats on `threads` workers; the sequential XXH3 pass (when wanted) runs concurrently on
// one more thread, so the two reads overlap instead of adding up.
detail::Moments contiguous_threaded(const TensorView& view, unsigned threads, bool hash,
                                    std::uint64_t& hash_out) {
  const std::int64_t n = view.numel();
  // Chunk boundaries on block multiples keep the block decomposition thread-independent.
  const std::int64_t blocks = (n + detail::kBlockElements - 1) / detail::kBlockElements;
  const std::int64_t per = (blocks + threads - 1) / threads * detail::kBlockElements;
  std::vector<detail::Moments> parts(threads);
  const std::size_t esize = dtype_size(view.dtype);
  auto work = [&](unsigned t) {
    const std::int64_t begin = std::min<std::int64_t>(n, t * per);
    const std::int64_t end = std::min<std::int64_t>(n, begin + per);
    parts[t] = detail::summarize_contiguous(
        static_cast<const std::uint8_t*>(view.data) + begin * esize, end - begin, view.dtype);
  };
  {
    std::vector<std::jthread> pool;
    if (hash) {
      pool.emplace_back([&] {
        hash_out = detail::xxh3_64(view.data, static_cast<std::size_t>(view.nbytes()));
      });
    }
    for (unsigned t = 1; t < threads; ++t) pool.emplace_back(work, t);
    work(0);
  }
  detail::Moments total;
  for (const detail::Moments& p : parts) total.merge(p);
  return total;
}

// The final figures of merged moments.
TensorStats figures(const detail::Moments& m, std::int64_t numel, std::int64_t bytes,
                    bool hashed, std::uint64_t hash) {
  TensorStats out;
  out.numel = numel;
  out.bytes = bytes;
  out.hashed = hashed;
  out.hash = hashed ? hash : 0;
  out.finite_count = m.n;
  out.nan_count = m.nan;
  out.pos_inf_count = m.pos_inf;
  out.neg_inf_count = m.neg_inf;
  out.zero_count = m.zeros;
  if (m.n == 0) {
    out.min = out.max = out.mean = out.std = out.abs_max = out.l2_norm = std::nan("");
  } else {
    const double n = static_cast<double>(m.n);
    out.min = m.min;
    out.max = m.max;
    out.mean = m.mean;
    out.std = std::sqrt(m.m2 / n);
    out.abs_max = std::max(std::fabs(m.min), std::fabs(m.max));
    out.l2_norm = std::sqrt(m.m2 + n * m.mean * m.mean);
  }
  return out;
}

// Elements per run of the single-threaded path.
std::int64_t run_elements(DType dtype) {
  return std::max<std::int64_t>(detail::kBlockElements,
                                kFusedRunBytes / static_cast<std::int64_t>(dtype_size(dtype)));
}

// Adds a view, run by run (contiguous) or gathered block by block (strided), to `m` and the
// hash stream.
void summarize(const TensorView& view, bool hash, detail::Moments& m, detail::Xxh3Stream& stream) {
  const std::size_t esize = dtype_size(view.dtype);
  const std::int64_t numel = view.numel();
  if (view.is_contiguous()) {
    const std::int64_t run = run_elements(view.dtype);
    const auto* base = static_cast<const std::uint8_t*>(view.data);
    for (std::int64_t b = 0; b < numel; b += run) {
      const std::int64_t n = std::min(run, numel - b);
      m.merge(detail::summarize_contiguous(base + b * esize, n, view.dtype));
      if (hash) stream.update(base + b * esize, n * esize);
    }
    return;
  }
  // Strided: gather runs in logical order into a buffer, then the contiguous kernels.
  std::vector<std::uint8_t> buf(detail::kBlockElements * esize);
  detail::Gatherer gather(view);
  for (std::int64_t n; (n = gather.next(buf.data())) > 0;) {
    m.merge(detail::summarize_contiguous(buf.data(), n, view.dtype));
    if (hash) stream.update(buf.data(), n * esize);
  }
}

}  // namespace

struct StatsAccumulator::State {
  State(DType d, bool h) : dtype(d), hash(h) {}
  DType dtype;
  bool hash;
  detail::Moments m;
  detail::Xxh3Stream stream;
  std::int64_t numel = 0;
};

StatsAccumulator::StatsAccumulator(DType dtype, bool hash)
    : state_(std::make_unique<State>(dtype, hash)) {}
StatsAccumulator::~StatsAccumulator() = default;
StatsAccumulator::StatsAccumulator(StatsAccumulator&&) noexcept = default;
StatsAccumulator& StatsAccumulator::operator=(StatsAccumulator&&) noexcept = default;

void StatsAccumulator::add(const TensorView& piece) {
  detail::validate_view(piece, "tensor piece");
  if (piece.dtype != state_->dtype) {
    throw Error("InvalidTensor", "a piece of dtype " + std::string(dtype_name(piece.dtype)) +
                                     " added to statistics of " +
                                     std::string(dtype_name(state_->dtype)));
  }
  summarize(piece, state_->hash, state_->m, state_->stream);
  state_->numel += piece.numel();
}

TensorStats StatsAccumulator::finish() const {
  const State& s = *state_;
  return figures(s.m, s.numel, s.numel * static_cast<std::int64_t>(dtype_size(s.dtype)), s.hash,
                 s.hash ? s.stream.digest() : 0);
}

std::int64_t StatsAccumulator::piece_elements(DType dtype, std::int64_t max_bytes) noexcept {
  const std::int64_t run = run_elements(dtype);
  const std::int64_t fit = max_bytes / static_cast<std::int64_t>(dtype_size(dtype));
  return std::max<std::int64_t>(1, fit / run) * run;
}

std::string hash_hex(std::uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

TensorStats compute_stats(const TensorView& view, const StatsOptions& options) {
  detail::validate_view(view, "tensor");
  detail::Moments m;
  std::uint64_t hash = 0;
  const unsigned threads =
      view.is_contiguous() ? detail::plan_threads(view.nbytes(), options.threads) : 1;
  if (threads > 1) {
    m = contiguous_threaded(view, threads, options.hash, hash);
  } else {
    detail::Xxh3Stream stream;
    summarize(view, options.hash, m, stream);
    if (options.hash) hash = stream.digest();
  }
  return figures(m, view.numel(), view.nbytes(), options.hash, hash);
}

}  // namespace genscope
