// genscope.Monitor and genscope.Run (the ActiveRun): construction from keyword arguments,
// runs, and the torch CUDA allocator probe.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
// After Python.h (pulled in by pybind11).
#include <frameobject.h>

#include <chrono>
#include <cmath>
#include <map>
#include <string>

#include "bindings.hpp"
#include "genscope/error.hpp"
#include "genscope/step_kind.hpp"

namespace genscope::python {
namespace {

// Python values of a parameters/labels dict become strings ("30", "1024x1024", "True").
std::map<std::string, std::string> string_map(const py::dict& values) {
  std::map<std::string, std::string> out;
  for (auto [key, value] : values) out[py::str(key)] = py::str(value);
  return out;
}

// "file.py:42" of the Python code that called into genscope, or "" when unknown.
std::string caller_location() {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed
  if (frame == nullptr) return {};
  PyCodeObject* code = PyFrame_GetCode(frame);  // new reference
  std::string out;
  try {
    out = std::string(py::str(py::handle(reinterpret_cast<PyObject*>(code)).attr("co_filename"))) +
          ":" + std::to_string(PyFrame_GetLineNumber(frame));
  } catch (const py::error_already_set&) {
  }
  Py_DECREF(code);
  return out;
}

MonitorOptions monitor_options(double sample_interval_ms, bool process, bool system, bool nvml,
                               const std::optional<std::string>& nvml_library,
                               const std::optional<std::string>& log_path, bool enabled,
                               bool sampler) {
  if (!(sample_interval_ms > 0) || !std::isfinite(sample_interval_ms)) {
    throw Error("InvalidArgument", "sample_interval_ms must be a positive number, got " +
                                       std::to_string(sample_interval_ms));
  }
  MonitorOptions o;
  o.enabled = enabled;
  o.sample_interval =
      std::chrono::microseconds(static_cast<std::int64_t>(sample_interval_ms * 1e3));
  o.sampler = sampler;
  o.process_probe = process;
  o.system_probe = system;
  o.nvml_probe = nvml;
  if (nvml_library) o.nvml_library = *nvml_library;
  if (log_path) o.log_path = *log_path;
  return o;
}

}  // namespace

PyMonitor::PyMonitor(MonitorOptions options) {
  py::gil_scoped_release release;  // opens probes (NVML)
  monitor_ = std::make_unique<Monitor>(std::move(options));
}

PyMonitor::~PyMonitor() {
  py::gil_scoped_release release;  // joins the sampler, which may wait for the GIL
  monitor_.reset();
}

PyRun::~PyRun() {
  py::gil_scoped_release release;
  run_ = ActiveRun();
}

const Run& PyRun::finish() {
  if (!finished_) {
    py::gil_scoped_release release;
    finished_ = run_.finish();
  }
  return *finished_;
}

Run PyRun::current() const {
  if (finished_) return *finished_;
  py::gil_scoped_release release;
  return run_.snapshot();
}

void register_monitor(py::module_& m) {
  py::class_<PyMonitor>(m, "Monitor",
                        "Owns the probes and the sampler thread; starts runs. Thread-safe.")
      .def(py::init([](double sample_interval_ms, bool process, bool system, bool nvml,
                       std::optional<std::string> nvml_library, std::optional<std::string> log_path,
                       bool enabled, bool sampler) {
             return std::make_unique<PyMonitor>(monitor_options(sample_interval_ms, process, system,
                                                                nvml, nvml_library, log_path,
                                                                enabled, sampler));
           }),
           py::arg("sample_interval_ms") = 10.0, py::arg("process") = true,
           py::arg("system") = true, py::arg("nvml") = true, py::arg("nvml_library") = py::none(),
           py::arg("log_path") = py::none(), py::arg("enabled") = true, py::arg("sampler") = true)
      .def(
          "start_run",
          [](PyMonitor& self, const std::string& pipeline, const std::string& model,
             const std::string& architecture, const py::dict& parameters, const py::dict& labels) {
            RunOptions options;
            options.pipeline.name = pipeline;
            options.pipeline.model = model;
            options.pipeline.architecture = architecture;
            options.pipeline.parameters = string_map(parameters);
            options.labels = string_map(labels);
            ActiveRun run;
            {
              py::gil_scoped_release release;
              run = self.get().start_run(std::move(options));
            }
            return std::make_unique<PyRun>(std::move(run));
          },
          py::arg("pipeline") = "", py::arg("model") = "", py::arg("architecture") = "",
          py::arg("parameters") = py::dict(), py::arg("labels") = py::dict(),
          py::keep_alive<0, 1>(),
          "Starts a run; genscope.Error('RunActive') while another run of this monitor is open.")
      .def(
          "add_torch_cuda_allocator",
          [](PyMonitor& self, int device, py::object cuda) {
            if (cuda.is_none()) cuda = py::module_::import("torch").attr("cuda");
            auto probe = make_allocator_probe(make_torch_cuda_source(std::move(cuda), device));
            py::gil_scoped_release release;
            self.get().add_probe(std::move(probe));
          },
          py::arg("device") = 0, py::kw_only(), py::arg("cuda") = py::none(),
          "Adds torch.cuda.memory_stats(device) as an allocator probe (for runs started later). "
          "`cuda` replaces the torch.cuda module (tests).")
      .def_property(
          "enabled", [](PyMonitor& self) { return self.get().enabled(); },
          [](PyMonitor& self, bool on) { self.get().set_enabled(on); },
          "Runtime switch: when off, new runs and steps record nothing.");

  py::class_<PyRun>(m, "Run", "A run in progress; use run.step(kind, name) as a context manager.")
      .def(
          "step",
          [](PyRun& self, const std::string& kind, const std::string& name) {
            const std::optional<StepKind> k = parse_step_kind(kind);
            if (!k) {
              throw Error("UnknownStepKind",
                          "unknown step kind '" + kind +
                              "' (model_loading, lora_application, text_encoding, "
                              "latent_generation, sampling, vae_decode, save, custom)");
            }
            if (self.finished()) throw Error("RunFinished", "step '" + name + "' after finish()");
            const std::string source = caller_location();
            Step step;
            {
              py::gil_scoped_release release;
              step = self.active().step(*k, name, source.empty() ? nullptr : source.c_str());
            }
            return std::make_unique<PyStep>(std::move(step));
          },
          py::arg("kind"), py::arg("name"), py::keep_alive<0, 1>(),
          "Opens a step (kind: model_loading, lora_application, text_encoding, "
          "latent_generation, sampling, vae_decode, save, custom); ends on `with` exit.")
      .def(
          "finish", [](PyRun& self) { return run_to_python(self.finish()); },
          "Ends the run (idempotent) and returns the run document as a dict.")
      .def(
          "snapshot", [](PyRun& self) { return run_to_python(self.current()); },
          "The run document recorded so far (open steps have status 'running').")
      .def(
          "label",
          [](PyRun& self, const std::string& k, const std::string& v) {
            self.active().label(k, v);
          },
          py::arg("key"), py::arg("value"), "Sets a run label.")
      .def(
          "add_note", [](PyRun& self, const std::string& note) { self.active().add_note(note); },
          py::arg("note"), "Adds a note on how figures were obtained.")
      .def(
          "record_monitoring_error",
          [](PyRun& self, const std::string& source, const std::string& message) {
            self.active().record_monitoring_error(source, message);
          },
          py::arg("source"), py::arg("message"), "Records a monitoring failure (never raises).")
      .def_property_readonly(
          "active", [](PyRun& self) { return self.active().active() && !self.finished(); },
          "False for a run of a disabled monitor, or once finished.")
      .def_property_readonly("finished", &PyRun::finished)
      .def("__enter__", [](py::object self) { return self; })
      .def(
          "__exit__",
          [](PyRun& self, py::handle, py::handle, py::handle) {
            self.finish();
            return false;
          },
          "Finishes the run; the document stays available through finish().");
}

}  // namespace genscope::python
