// ProbeSlot: one probe as the monitor drives it — serialised calls, and for probes that may
// block (a GPU driver), calls made on a worker thread and abandoned after a timeout so a hang
// never stalls the pipeline. While a call is still hung, further calls fail at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "genscope/probe.hpp"

namespace genscope::detail {

class ProbeSlot {
 public:
  ProbeSlot(std::unique_ptr<Probe> probe, std::chrono::milliseconds timeout);
  ~ProbeSlot();
  ProbeSlot(const ProbeSlot&) = delete;
  ProbeSlot& operator=(const ProbeSlot&) = delete;

  /// Opens the probe once; later calls return the first outcome.
  ProbeStatus open();
  bool is_open() const noexcept { return opened_ok_; }
  const std::vector<MetricInfo>& metrics() const { return probe_->metrics(); }
  bool has_exact_peaks() const noexcept { return has_exact_peaks_; }
  bool has_parts() const noexcept { return has_parts_; }
  std::string name() const { return name_; }
  std::vector<GpuInfo> gpus();
  /// The sampler reads this probe at most once per `period` (zero: at every sample); the
  /// rows in between repeat its last reading. Step boundaries always read it.
  void set_series_period(std::chrono::nanoseconds period) noexcept { series_period_ = period; }
  std::chrono::nanoseconds series_period() const noexcept { return series_period_; }

  ProbeStatus sample(std::span<double> out);
  ProbeStatus read_peaks(std::span<double> out);
  ProbeStatus reset_peaks();
  ProbeStatus read_parts(std::vector<FigurePart>& out);

 private:
  ProbeStatus call(const std::function<ProbeStatus(Probe&)>& fn);
  ProbeStatus call_span(const std::function<ProbeStatus(Probe&, std::span<double>)>& fn,
                        std::span<double> out);
  struct Worker;
  std::shared_ptr<Probe> probe_;
  std::string name_;
  std::chrono::milliseconds timeout_;
  std::mutex mutex_;  // serialises calls on this probe
  bool open_attempted_ = false;
  bool opened_ok_ = false;
  bool has_exact_peaks_ = false;
  bool has_parts_ = false;
  ProbeStatus open_status_;
  std::shared_ptr<Worker> worker_;  // only for may_block() probes
  std::chrono::nanoseconds series_period_{0};
};

}  // namespace genscope::detail
