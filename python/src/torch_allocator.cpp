// The torch CUDA allocator source: torch.cuda.memory_stats(device) and
// reset_peak_memory_stats(device) called through Python, for make_allocator_probe.
//
// The probe calls the source from the pipeline thread (step open/end, GIL released by the
// binding) and from the sampler thread; both take the GIL here. A Python exception becomes
// a failed read (recorded in the run's monitoring_errors by the core), never an exception in
// the pipeline. After interpreter exit started, the source answers "interpreter finalizing"
// without touching Python (taking the GIL then would end the calling thread).
#include <pybind11/pybind11.h>

#include <string>

#include "bindings.hpp"

namespace genscope::python {
namespace {

constexpr const char* kAllocatedCurrent = "allocated_bytes.all.current";
constexpr const char* kReservedCurrent = "reserved_bytes.all.current";
constexpr const char* kAllocatedPeak = "allocated_bytes.all.peak";
constexpr const char* kReservedPeak = "reserved_bytes.all.peak";

class TorchCudaSource final : public AllocatorSource {
 public:
  // Called with the GIL held. torch.cuda.memory_stats() answers {} (zeros) without CUDA, so
  // an unavailable CUDA is checked once here and reported on every read instead.
  TorchCudaSource(py::object cuda, int device) : cuda_(std::move(cuda)), device_(device) {
    if (py::hasattr(cuda_, "is_available")) {
      try {
        available_ = py::bool_(cuda_.attr("is_available")());
      } catch (py::error_already_set& e) {
        unavailable_reason_ = "is_available() raised " + describe(e);
        available_ = false;
      }
      if (!available_ && unavailable_reason_.empty()) {
        unavailable_reason_ = "CUDA is not available (torch.cuda.is_available() is False)";
      }
    }
  }

  ~TorchCudaSource() override {
    if (python_finalizing() || !Py_IsInitialized()) {
      cuda_.release();  // leak: the interpreter is going away
      return;
    }
    py::gil_scoped_acquire gil;
    cuda_ = py::object();
  }

  std::string device() const override { return "cuda:" + std::to_string(device_); }

  bool read(AllocatorFigures& out, std::string& error) override {
    if (python_finalizing()) return fail(error, "interpreter finalizing");
    if (!available_) return fail(error, unavailable_reason_);
    py::gil_scoped_acquire gil;
    try {
      py::object stats = cuda_.attr("memory_stats")(device_);
      if (!PyMapping_Check(stats.ptr())) {
        return fail(error, "memory_stats() returned " +
                               std::string(py::str(py::type::handle_of(stats).attr("__name__"))));
      }
      // torch returns {} before the device's allocator was used: all figures are zero then.
      if (py::len(stats) == 0) {
        out = {};
        return true;
      }
      out.allocated_bytes = figure(stats, kAllocatedCurrent);
      out.reserved_bytes = figure(stats, kReservedCurrent);
      out.peak_allocated_bytes = figure(stats, kAllocatedPeak);
      out.peak_reserved_bytes = figure(stats, kReservedPeak);
      return true;
    } catch (py::error_already_set& e) {
      const std::string what = describe(e);
      return fail(error, "memory_stats(" + std::to_string(device_) + ") raised " + what);
    }
  }

  bool reset_peaks(std::string& error) override {
    if (python_finalizing()) return fail(error, "interpreter finalizing");
    if (!available_) return fail(error, unavailable_reason_);
    py::gil_scoped_acquire gil;
    try {
      cuda_.attr("reset_peak_memory_stats")(device_);
      return true;
    } catch (py::error_already_set& e) {
      return fail(error,
                  "reset_peak_memory_stats(" + std::to_string(device_) + ") raised " + describe(e));
    }
  }

 private:
  static bool fail(std::string& error, std::string message) {
    error = std::move(message);
    return false;
  }

  // "Type: message" of a Python exception; clears it (needs the GIL).
  static std::string describe(py::error_already_set& e) {
    std::string out = exception_type_name(e.type());
    const std::string message = exception_message(e.value());
    if (!message.empty()) out += ": " + message;
    e.restore();
    PyErr_Clear();
    return out;
  }

  static double figure(const py::object& stats, const char* key) {
    py::object value = stats[py::str(key)];  // KeyError when missing: a recorded failure
    return py::float_(value).cast<double>();
  }

  py::object cuda_;
  int device_;
  bool available_ = true;
  std::string unavailable_reason_;
};

}  // namespace

std::shared_ptr<AllocatorSource> make_torch_cuda_source(py::object cuda, int device) {
  return std::make_shared<TorchCudaSource>(std::move(cuda), device);
}

}  // namespace genscope::python
