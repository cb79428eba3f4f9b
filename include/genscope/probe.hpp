// The probe interface: a source of memory and device figures.
//
// A probe describes its figures once (metrics()), then fills a span of values on every
// sample. Probes never throw into the pipeline: a failure is returned as a ProbeStatus and
// the monitor records it in the run's monitoring_errors. A value that is unavailable for
// this sample is NaN.
#pragma once

#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "genscope/metric.hpp"
#include "genscope/run.hpp"

namespace genscope {

/// The outcome of a probe call: empty error means success.
struct ProbeStatus {
  std::string error;  ///< Human-readable failure; empty when the call succeeded.
  /// Set by open() when what the probe reads is simply not on this machine (no NVIDIA
  /// library or driver, no GPU): `error` says why; the monitor records it in
  /// Run::absent_probes, not as a monitoring error.
  bool absent = false;
  bool ok() const noexcept { return error.empty(); }
  static ProbeStatus failure(std::string message) { return {std::move(message)}; }
  /// open() outcome of a probe whose source is not present on this machine.
  static ProbeStatus not_present(std::string reason) { return {std::move(reason), true}; }
};

/// A source of named figures (RAM, VRAM, allocator counters, ...).
class Probe {
 public:
  virtual ~Probe() = default;
  /// Short stable name: "process", "system", "nvml", "allocator", ...
  virtual std::string name() const = 0;
  /// The figures this probe reports, in the order sample() fills them. Fixed after open().
  virtual const std::vector<MetricInfo>& metrics() const = 0;
  /// Prepares the probe (open files, load libraries). Called once, before any sample.
  virtual ProbeStatus open() = 0;
  /// Writes the current value of every metric into `out` (size == metrics().size()).
  virtual ProbeStatus sample(std::span<double> out) = 0;
  /// Writes the exact peak since the last reset for metrics with exact_peak, NaN otherwise.
  virtual ProbeStatus read_peaks(std::span<double> out) {
    for (double& v : out) v = std::numeric_limits<double>::quiet_NaN();
    return {};
  }
  /// Restarts the exact peaks from the current values.
  virtual ProbeStatus reset_peaks() { return {}; }
  /// True when calls may block for a long time (a driver); such probes are called on a
  /// worker thread with a timeout so a hang never stalls the pipeline.
  virtual bool may_block() const { return false; }
  /// The GPUs this probe sees (name, UUID, driver, total memory); empty for non-GPU probes.
  virtual std::vector<GpuInfo> gpus() const { return {}; }
};

/// Figures a framework allocator exposes (PyTorch's CUDA caching allocator, ...).
struct AllocatorFigures {
  double allocated_bytes = 0;       ///< Bytes in live tensors.
  double reserved_bytes = 0;        ///< Bytes cached by the allocator (>= allocated).
  double peak_allocated_bytes = 0;  ///< Exact peak of allocated since the last reset.
  double peak_reserved_bytes = 0;   ///< Exact peak of reserved since the last reset.
};

/// What an integration implements to feed a framework allocator into genscope.
class AllocatorSource {
 public:
  virtual ~AllocatorSource() = default;
  /// Device label of this allocator, e.g. "cuda:0".
  virtual std::string device() const = 0;
  /// Current figures; throws or returns false on failure (the probe records it).
  virtual bool read(AllocatorFigures& out, std::string& error) = 0;
  /// Resets the exact peaks (torch.cuda.reset_peak_memory_stats()).
  virtual bool reset_peaks(std::string& error) = 0;
};

/// Process memory: RSS from /proc/self/statm, exact peak from VmHWM (reset by clear_refs).
std::unique_ptr<Probe> make_process_probe();
/// System memory from /proc/meminfo: total, available, used, used percent.
std::unique_ptr<Probe> make_system_probe();
/// NVIDIA GPUs through libnvidia-ml.so.1 loaded at run time (path overridable by
/// GENSCOPE_NVML_LIBRARY or `library_path`).
std::unique_ptr<Probe> make_nvml_probe(std::string library_path = {});
/// A framework allocator fed by an integration; metrics are "alloc.<device>.*".
std::unique_ptr<Probe> make_allocator_probe(std::shared_ptr<AllocatorSource> source);

}  // namespace genscope
