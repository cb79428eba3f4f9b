// Usage statistics across generations in one process (seed 003): initialisation time,
// generations, average/total inference time, peak and current memory, device.
#pragma once

#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "genscope/run.hpp"

namespace genscope {

/// A snapshot of the tracker's figures.
struct UsageStats {
  std::int64_t initialization_ns = 0;
  std::uint64_t generations = 0;
  std::int64_t total_inference_ns = 0;
  double average_inference_ns = kNaN;  ///< NaN before the first generation.
  double peak_memory_bytes = kNaN;     ///< Highest memory seen over all generations.
  double current_memory_bytes = kNaN;  ///< Memory after the latest generation.
  std::string device;                  ///< e.g. "NVIDIA H200" or "cpu".
};

/// Accumulates usage statistics across generations. Thread-safe.
class UsageTracker {
 public:
  /// Records the model initialisation time (adds to earlier initialisations).
  void record_initialization(std::int64_t duration_ns);
  /// Records one generation with its peak memory and the memory after it (NaN = unknown).
  void record_generation(std::int64_t duration_ns, double peak_memory_bytes,
                         double current_memory_bytes);
  /// Records a finished run: model_loading steps count as initialisation, the rest of the
  /// run as one generation; memory from gpu*.used_bytes, else process.rss_bytes.
  void record_run(const Run& run);
  /// Sets the device name.
  void set_device(std::string device);
  /// The current figures.
  UsageStats stats() const;
  /// JSON for reports: seconds and bytes fields (docs/validation.md).
  nlohmann::json to_json() const;

 private:
  mutable std::mutex mutex_;
  UsageStats stats_;
};

}  // namespace genscope
