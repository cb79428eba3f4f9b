// Private header of the Python binding: the wrapper classes and the per-file registration
// functions that module.cpp calls.
//
// GIL rule: every call that may call a probe (opening or ending a step, starting or
// finishing a run, destroying a monitor/run/step) runs with the GIL released, because a
// probe may be a Python callback (the torch allocator source) that needs the GIL from the
// sampler thread. Calls that only take RunState::mutex (labels, counters, attachments) keep
// the GIL: the core never calls a probe while holding that mutex.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>  // in every file: type casters must agree across files

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "genscope/dtype.hpp"
#include "genscope/monitor.hpp"
#include "genscope/probe.hpp"
#include "genscope/run.hpp"
#include "genscope/step.hpp"
#include "genscope/tensor_view.hpp"

namespace genscope::python {

namespace py = pybind11;

/// Owns a Monitor; destroys it with the GIL released (joins the sampler thread).
class PyMonitor {
 public:
  /// `cuda_allocator`: None = attach torch.cuda's allocator probe at start_run() when torch is
  /// imported and CUDA is available; False = never; True/int/list of ints = these devices now.
  PyMonitor(MonitorOptions options, py::object cuda_allocator);
  ~PyMonitor();
  Monitor& get() { return *monitor_; }
  /// Adds the torch.cuda allocator probe of `device` (cuda = torch.cuda or a look-alike).
  void add_torch_cuda_allocator(py::object cuda, int device);
  /// The automatic attachment, called before every run starts (GIL held).
  void attach_torch_cuda_if_available();
  /// Allocator sources added so far (read live by usage_statistics()).
  const std::vector<std::shared_ptr<AllocatorSource>>& allocator_sources() const {
    return sources_;
  }

 private:
  std::unique_ptr<Monitor> monitor_;
  std::vector<std::shared_ptr<AllocatorSource>> sources_;
  bool auto_cuda_ = false;  ///< Still waiting for the automatic attachment.
};

/// An ActiveRun plus the finished Run once finish() was called.
class PyRun {
 public:
  explicit PyRun(ActiveRun run) : run_(std::move(run)) {}
  ~PyRun();
  ActiveRun& active() { return run_; }
  /// Ends the run (idempotent; at `at_ns` on the steady clock when given) and returns the
  /// finished value.
  const Run& finish(std::optional<std::int64_t> at_ns = std::nullopt);
  /// The finished run, or a snapshot of the run in progress.
  Run current() const;
  bool finished() const { return finished_.has_value(); }

 private:
  ActiveRun run_;
  std::optional<Run> finished_;
};

/// A Step scope bound to the Python thread that opened it.
class PyStep {
 public:
  explicit PyStep(Step step) : step_(std::move(step)), owner_(std::this_thread::get_id()) {}
  ~PyStep();
  Step& get() { return step_; }
  /// Ends the step (at `at_ns` on the steady clock when given); genscope.Error
  /// ("StepWrongThread") from another thread.
  void end(std::optional<std::int64_t> at_ns = std::nullopt);

 private:
  Step step_;
  std::thread::id owner_;
};

/// One attempt of a fallback chain: `with step.attempt("tiled") as a: ...`.
struct PyAttempt {
  py::object step;  ///< The PyStep (kept alive).
  std::string strategy;
  std::int64_t start_ns = 0;
  std::int64_t duration_ns = 0;
  bool done = false;
  bool ok = false;
  std::string error;
};

/// A host view of a NumPy array or torch tensor plus the Python objects that own its memory.
struct HostTensor {
  py::array array;  ///< Keeps the data alive while the GIL is released.
  TensorView view;
  std::string framework;  ///< "numpy" or "torch".
  bool zero_copy = true;
  std::string note;
};

/// NumPy array or torch tensor -> host view (torch: detach, cpu, raw bits for bf16/fp8).
/// genscope.Error("UnsupportedDType") for dtypes genscope does not handle.
HostTensor to_host(py::handle obj);
/// "F16", "float16", "torch.float16", "bfloat16", "fp16", ... -> DType;
/// genscope.Error("UnknownDType") otherwise.
DType parse_dtype_name(std::string name);

/// "module.Qualname" of an exception type ("RuntimeError" for builtins).
std::string exception_type_name(py::handle type);
/// str(exception), never throwing.
std::string exception_message(py::handle value);
/// nlohmann::json -> Python object (through json.loads).
py::object to_python(const nlohmann::json& value);
/// Python object -> nlohmann::json (through json.dumps).
nlohmann::json from_python(py::handle value);
/// Run -> run document dict.
py::object run_to_python(const Run& run);

void register_monitor(py::module_& m);
void register_step(py::module_& m);
void register_tensor(py::module_& m);
void register_model(py::module_& m);

/// An AllocatorSource that reads `cuda.memory_stats(device)` and calls
/// `cuda.reset_peak_memory_stats(device)` (cuda = torch.cuda or a look-alike), taking the GIL.
std::shared_ptr<AllocatorSource> make_torch_cuda_source(py::object cuda, int device);

/// Set at interpreter exit (atexit): Python callbacks must no longer take the GIL.
bool python_finalizing() noexcept;

}  // namespace genscope::python
