// The allocator probe: a framework allocator's figures (PyTorch's CUDA caching allocator,
// ...) supplied by an integration through an AllocatorSource.
//
//   alloc.<device>.allocated_bytes   live tensors          exact peak: peak_allocated
//   alloc.<device>.reserved_bytes    cached by allocator   exact peak: peak_reserved
//
// The source is user code: anything it throws is caught and returned as a ProbeStatus.
// The probe keeps no mutable state, so it is as thread-safe as its source.
#include <cassert>
#include <exception>
#include <limits>

#include "genscope/probe.hpp"

namespace genscope {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string describe_current_exception() {
  try {
    throw;
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  } catch (...) {
    return "threw a non-standard exception";
  }
}

class AllocatorProbe final : public Probe {
 public:
  explicit AllocatorProbe(std::shared_ptr<AllocatorSource> source) : source_(std::move(source)) {
    assert(source_ && "make_allocator_probe needs a source");
    try {
      if (source_) device_ = source_->device();
    } catch (...) {
      device_error_ = "allocator device() " + describe_current_exception();
    }
    if (device_.empty()) device_ = "unknown";
    metrics_ = {{"alloc." + device_ + ".allocated_bytes", Unit::kBytes, true},
                {"alloc." + device_ + ".reserved_bytes", Unit::kBytes, true}};
  }

  std::string name() const override { return "allocator"; }
  const std::vector<MetricInfo>& metrics() const override { return metrics_; }

  ProbeStatus open() override {
    if (!source_) return ProbeStatus::failure("allocator probe: no source");
    if (!device_error_.empty()) return ProbeStatus::failure(device_error_);
    return {};
  }

  ProbeStatus sample(std::span<double> out) override {
    out[0] = out[1] = kNaN;
    AllocatorFigures figures;
    if (ProbeStatus status = read(figures); !status.ok()) return status;
    out[0] = figures.allocated_bytes;
    out[1] = figures.reserved_bytes;
    return {};
  }

  ProbeStatus read_peaks(std::span<double> out) override {
    out[0] = out[1] = kNaN;
    AllocatorFigures figures;
    if (ProbeStatus status = read(figures); !status.ok()) return status;
    out[0] = figures.peak_allocated_bytes;
    out[1] = figures.peak_reserved_bytes;
    return {};
  }

  ProbeStatus reset_peaks() override {
    if (!source_) return ProbeStatus::failure("allocator probe: no source");
    std::string error;
    try {
      if (source_->reset_peaks(error)) return {};
    } catch (...) {
      error = describe_current_exception();
    }
    return ProbeStatus::failure("allocator " + device_ +
                                " reset_peaks: " + (error.empty() ? std::string("failed") : error));
  }

 private:
  ProbeStatus read(AllocatorFigures& figures) {
    if (!source_) return ProbeStatus::failure("allocator probe: no source");
    std::string error;
    try {
      if (source_->read(figures, error)) return {};
    } catch (...) {
      error = describe_current_exception();
    }
    return ProbeStatus::failure("allocator " + device_ +
                                " read: " + (error.empty() ? std::string("failed") : error));
  }

  std::shared_ptr<AllocatorSource> source_;
  std::string device_;
  std::string device_error_;
  std::vector<MetricInfo> metrics_;
};

}  // namespace

std::unique_ptr<Probe> make_allocator_probe(std::shared_ptr<AllocatorSource> source) {
  return std::make_unique<AllocatorProbe>(std::move(source));
}

}  // namespace genscope
