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
#include <vector>

#include "bindings.hpp"
#include "genscope/error.hpp"
#include "genscope/metrics.hpp"
#include "genscope/otlp.hpp"
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

// The outputs a Monitor's options can send finished runs to (history, Prometheus).
struct MonitorOutputs {
  bool record = false;
  std::optional<std::string> history_db;
  int metrics_port = 0;
  std::string metrics_bind;
  std::optional<std::string> pushgateway;
  py::object otlp;  ///< None/False: off; True: OTEL_EXPORTER_OTLP_ENDPOINT; str: the endpoint.
};

MonitorOptions monitor_options(double sample_interval_ms, double max_sample_interval_ms,
                               bool process, bool system, bool nvml,
                               const std::optional<std::string>& nvml_library,
                               const std::optional<std::string>& log_path, bool enabled,
                               bool sampler, const MonitorOutputs& outputs) {
  if (!(sample_interval_ms > 0) || !std::isfinite(sample_interval_ms)) {
    throw Error("InvalidArgument", "sample_interval_ms must be a positive number, got " +
                                       std::to_string(sample_interval_ms));
  }
  if (!(max_sample_interval_ms > 0) || !std::isfinite(max_sample_interval_ms)) {
    throw Error("InvalidArgument", "max_sample_interval_ms must be a positive number, got " +
                                       std::to_string(max_sample_interval_ms));
  }
  MonitorOptions o;
  o.enabled = enabled;
  o.sample_interval =
      std::chrono::microseconds(static_cast<std::int64_t>(sample_interval_ms * 1e3));
  o.max_sample_interval =
      std::chrono::microseconds(static_cast<std::int64_t>(max_sample_interval_ms * 1e3));
  o.sampler = sampler;
  o.process_probe = process;
  o.system_probe = system;
  o.nvml_probe = nvml;
  if (nvml_library) o.nvml_library = *nvml_library;
  if (log_path) o.log_path = *log_path;
  o.record = outputs.record;
  if (outputs.history_db) o.history_db = *outputs.history_db;
  if (outputs.metrics_port < 0 || outputs.metrics_port > 65535) {
    throw Error("InvalidArgument", "metrics_port must be 0 (off) or a port 1-65535, got " +
                                       std::to_string(outputs.metrics_port));
  }
  o.metrics_port = static_cast<std::uint16_t>(outputs.metrics_port);
  o.metrics_bind = outputs.metrics_bind;
  if (outputs.pushgateway) {
    check_pushgateway_url(*outputs.pushgateway);  // InvalidPushgatewayUrl now, not at run end
    o.pushgateway_url = *outputs.pushgateway;
  }
  if (!outputs.otlp.is_none()) {
    if (py::isinstance<py::bool_>(outputs.otlp)) {
      o.otlp.enabled = outputs.otlp.cast<bool>();
    } else if (py::isinstance<py::str>(outputs.otlp)) {
      o.otlp.enabled = true;
      o.otlp.endpoint = outputs.otlp.cast<std::string>();
    } else {
      throw Error("InvalidArgument", "otlp must be None, a bool or an endpoint URL string");
    }
    if (o.otlp.enabled) resolve_otlp_targets(o.otlp);  // InvalidOtlpEndpoint now
  }
  return o;
}

py::object number_or_none(double value) {
  return std::isfinite(value) ? py::object(py::float_(value)) : py::object(py::none());
}

// Seed 003's get_usage_statistics(): the monitor's totals over finished runs plus the torch
// allocator's current figures, read now (like torch.cuda.memory_allocated()).
py::dict usage_statistics(PyMonitor& self) {
  const UsageStats s = self.get().usage();
  py::dict out;
  out["initialization_seconds"] = static_cast<double>(s.initialization_ns) / 1e9;
  out["generations"] = s.generations;
  out["average_inference_seconds"] = number_or_none(s.average_inference_ns / 1e9);
  out["total_inference_seconds"] = static_cast<double>(s.total_inference_ns) / 1e9;
  out["peak_memory_bytes"] = number_or_none(s.peak_memory_bytes);
  out["current_memory_bytes"] = number_or_none(s.current_memory_bytes);
  double allocated = kNaN, reserved = kNaN;
  for (const auto& source : self.allocator_sources()) {  // the first one that answers
    AllocatorFigures figures;
    std::string error;
    bool ok = false;
    try {
      ok = source->read(figures, error);
    } catch (const std::exception&) {
    }
    if (ok) {
      allocated = figures.allocated_bytes;
      reserved = figures.reserved_bytes;
      break;
    }
  }
  out["current_memory_allocated_bytes"] = number_or_none(allocated);
  out["current_memory_reserved_bytes"] = number_or_none(reserved);
  out["device_name"] = s.device.empty() ? py::object(py::none()) : py::object(py::str(s.device));
  return out;
}

}  // namespace

PyMonitor::PyMonitor(MonitorOptions options, py::object cuda_allocator) {
  {
    py::gil_scoped_release release;  // opens probes (NVML)
    monitor_ = std::make_unique<Monitor>(std::move(options));
  }
  if (cuda_allocator.is_none()) {
    auto_cuda_ = true;
  } else if (py::isinstance<py::bool_>(cuda_allocator)) {
    if (py::bool_(cuda_allocator)) {
      py::object cuda = py::module_::import("torch").attr("cuda");
      add_torch_cuda_allocator(cuda, cuda.attr("current_device")().cast<int>());
    }
  } else if (py::isinstance<py::int_>(cuda_allocator)) {
    add_torch_cuda_allocator(py::module_::import("torch").attr("cuda"), cuda_allocator.cast<int>());
  } else {
    py::object cuda = py::module_::import("torch").attr("cuda");
    for (int device : cuda_allocator.cast<std::vector<int>>())
      add_torch_cuda_allocator(cuda, device);
  }
}

void PyMonitor::add_torch_cuda_allocator(py::object cuda, int device) {
  auto_cuda_ = false;  // an explicit probe replaces the automatic one
  std::shared_ptr<AllocatorSource> source = make_torch_cuda_source(std::move(cuda), device);
  sources_.push_back(source);
  auto probe = make_allocator_probe(std::move(source));
  py::gil_scoped_release release;
  monitor_->add_probe(std::move(probe));
}

// Only a process that imported torch is a torch pipeline: genscope never imports torch itself
// here, so `import genscope` stays light and a CPU-only machine sees nothing at all.
void PyMonitor::attach_torch_cuda_if_available() {
  if (!auto_cuda_) return;
  py::object modules = py::module_::import("sys").attr("modules");
  py::object torch = modules.attr("get")("torch");
  if (torch.is_none() || !py::hasattr(torch, "cuda")) return;  // not imported (yet)
  auto_cuda_ = false;
  try {
    py::object cuda = torch.attr("cuda");
    if (!py::bool_(cuda.attr("is_available")())) return;
    add_torch_cuda_allocator(cuda, cuda.attr("current_device")().cast<int>());
  } catch (py::error_already_set&) {
    // A CUDA that cannot even report itself is treated as absent (no probe, no error).
    PyErr_Clear();
  }
}

PyMonitor::~PyMonitor() {
  py::gil_scoped_release release;  // joins the sampler, which may wait for the GIL
  monitor_.reset();
}

PyRun::~PyRun() {
  py::gil_scoped_release release;
  run_ = ActiveRun();
}

const Run& PyRun::finish(std::optional<std::int64_t> at_ns) {
  if (!finished_) {
    py::gil_scoped_release release;
    finished_ = at_ns ? run_.finish_at(*at_ns) : run_.finish();
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
                       bool enabled, bool sampler, py::object cuda_allocator, bool record,
                       std::optional<std::string> history_db, int metrics_port,
                       std::string metrics_bind, std::optional<std::string> pushgateway,
                       double max_sample_interval_ms, py::object otlp) {
             const MonitorOutputs outputs{record,
                                          std::move(history_db),
                                          metrics_port,
                                          std::move(metrics_bind),
                                          std::move(pushgateway),
                                          std::move(otlp)};
             return std::make_unique<PyMonitor>(
                 monitor_options(sample_interval_ms, max_sample_interval_ms, process, system,
                                 nvml, nvml_library, log_path, enabled, sampler, outputs),
                 std::move(cuda_allocator));
           }),
           py::arg("sample_interval_ms") = 10.0, py::arg("process") = true,
           py::arg("system") = true, py::arg("nvml") = true, py::arg("nvml_library") = py::none(),
           py::arg("log_path") = py::none(), py::arg("enabled") = true, py::arg("sampler") = true,
           py::arg("cuda_allocator") = py::none(), py::kw_only(), py::arg("record") = false,
           py::arg("history_db") = py::none(), py::arg("metrics_port") = 0,
           py::arg("metrics_bind") = "127.0.0.1", py::arg("pushgateway") = py::none(),
           py::arg("max_sample_interval_ms") = 500.0, py::arg("otlp") = py::none())
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
            self.attach_torch_cuda_if_available();
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
            self.add_torch_cuda_allocator(std::move(cuda), device);
          },
          py::arg("device") = 0, py::kw_only(), py::arg("cuda") = py::none(),
          "Adds torch.cuda.memory_stats(device) as an allocator probe (for runs started later). "
          "`cuda` replaces the torch.cuda module (tests).")
      .def("usage_statistics", &usage_statistics,
           "Seed 003's usage statistics over every run this monitor finished (a dict).")
      .def_property(
          "enabled", [](PyMonitor& self) { return self.get().enabled(); },
          [](PyMonitor& self, bool on) { self.get().set_enabled(on); },
          "Runtime switch: when off, new runs and steps record nothing.");

  py::class_<PyRun>(m, "Run", "A run in progress; use run.step(kind, name) as a context manager.")
      .def(
          "step",
          [](PyRun& self, const std::string& kind, const std::string& name,
             const std::optional<std::string>& source_override,
             std::optional<std::int64_t> start_ns) {
            const std::optional<StepKind> k = parse_step_kind(kind);
            if (!k) {
              throw Error("UnknownStepKind",
                          "unknown step kind '" + kind +
                              "' (model_loading, lora_application, text_encoding, "
                              "latent_generation, sampling, vae_decode, save, custom)");
            }
            if (self.finished()) throw Error("RunFinished", "step '" + name + "' after finish()");
            const std::string source = source_override ? *source_override : caller_location();
            Step step;
            {
              py::gil_scoped_release release;
              const char* src = source.empty() ? nullptr : source.c_str();
              step = start_ns ? self.active().step_at(*start_ns, *k, name, src)
                              : self.active().step(*k, name, src);
            }
            return std::make_unique<PyStep>(std::move(step));
          },
          py::arg("kind"), py::arg("name"), py::arg("source") = py::none(),
          py::arg("start_ns") = py::none(), py::keep_alive<0, 1>(),
          "Opens a step (kind: model_loading, lora_application, text_encoding, "
          "latent_generation, sampling, vae_decode, save, custom); ends on `with` exit. "
          "`source` replaces the calling file:line; `start_ns` (time.monotonic_ns()) is when "
          "the step began, when that moment was noted before (its baseline figures are taken "
          "now).")
      .def(
          "finish",
          [](PyRun& self, std::optional<std::int64_t> at_ns) {
            return run_to_python(self.finish(at_ns));
          },
          py::arg("at_ns") = py::none(),
          "Ends the run (idempotent) and returns the run document as a dict; `at_ns` "
          "(time.monotonic_ns(), not before its start): it ended then, at a moment noted "
          "before (e.g. on another thread).")
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
          "set_distributed",
          [](PyRun& self, int rank, int world_size, int local_rank, int node_rank,
             const std::string& group, const std::string& group_source) {
            if (world_size < 1 || rank < 0 || rank >= world_size) {
              throw Error("InvalidArgument", "rank " + std::to_string(rank) + " is not in [0, world_size " +
                                                 std::to_string(world_size) + ")");
            }
            DistributedInfo info;
            info.rank = rank;
            info.world_size = world_size;
            info.local_rank = local_rank;
            info.node_rank = node_rank;
            info.group = group;
            info.group_source = group_source;
            self.active().set_distributed(std::move(info));
          },
          py::arg("rank"), py::arg("world_size"), py::kw_only(), py::arg("local_rank") = -1,
          py::arg("node_rank") = -1, py::arg("group") = "", py::arg("group_source") = "",
          "Sets the run's place in a distributed job (genscope.torch does it from an initialised "
          "torch.distributed process group).")
      .def(
          "add_note", [](PyRun& self, const std::string& note) { self.active().add_note(note); },
          py::arg("note"), "Adds a note on how figures were obtained.")
      .def(
          "attach",
          [](PyRun& self, const std::string& type, const std::string& name, py::handle data) {
            nlohmann::json json;
            try {
              json = from_python(data);
            } catch (const nlohmann::json::exception& e) {  // NaN/Infinity have no JSON form
              self.active().record_monitoring_error("attach", name + ": " + e.what());
              return;
            }
            self.active().attach(Attachment{type, name, std::move(json)});
          },
          py::arg("type"), py::arg("name"), py::arg("data"),
          "Attaches a run-level analysis {type, name, data} (JSON-serialisable data).")
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
