// Model snapshots and the seed 002 LoRA application report for Python objects: the parameter
// table of a torch module (shapes, dtypes, devices, bytes, XXH3 of the bytes) becomes a C++
// ModelSnapshot, and the C++ report (identity, weight, placement and memory changes) is built
// from two of them. genscope.torch.observe_patching() is the public face of both.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "genscope/error.hpp"
#include "genscope/lora_report.hpp"
#include "genscope/model_snapshot.hpp"
#include "genscope/tensor_stats.hpp"

namespace genscope::python {
namespace {

std::string string_or(const py::dict& d, const char* key, const std::string& fallback = "") {
  if (!d.contains(key) || d[key].is_none()) return fallback;
  return py::str(d[key]);
}

double number_or_nan(const py::dict& d, const char* key) {
  if (!d.contains(key) || d[key].is_none()) return kNaN;
  return d[key].cast<double>();
}

ModelSnapshot snapshot_from_python(py::handle value) {
  ModelSnapshot s;
  from_json(from_python(value), s);  // InvalidSnapshotJson on a malformed dict
  return s;
}

// One parameter: its table entry, and the XXH3 of its bytes when `hash` (GIL released).
ParameterInfo parameter_info(py::handle tensor, bool hash) {
  ParameterInfo p;
  p.dtype = parse_dtype_name(py::str(tensor.attr("dtype")));
  for (py::handle d : tensor.attr("shape")) p.shape.push_back(d.cast<std::int64_t>());
  std::uint64_t numel = 1;
  for (std::int64_t d : p.shape) numel *= static_cast<std::uint64_t>(d);
  p.bytes = numel * dtype_size(p.dtype);
  p.device = py::hasattr(tensor, "device") ? std::string(py::str(tensor.attr("device"))) : "cpu";
  if (hash && p.device != "meta") {
    HostTensor host = to_host(tensor);
    py::gil_scoped_release release;  // host.array keeps the memory alive
    p.content_hash = compute_stats(host.view, {.hash = true, .threads = 0}).hash;
  }
  return p;
}

// _model_snapshot(identity, tensors, hash) -> (snapshot dict, [errors])
py::tuple model_snapshot(const py::dict& identity, const py::iterable& tensors, bool hash) {
  ModelSnapshot s;
  s.id = string_or(identity, "model_id");
  s.class_name = string_or(identity, "class");
  s.device = string_or(identity, "device");
  s.load_device = string_or(identity, "load_device");
  s.offload_device = string_or(identity, "offload_device");
  s.patches_count = identity.contains("patches_count") && !identity["patches_count"].is_none()
                        ? identity["patches_count"].cast<std::int64_t>()
                        : 0;
  s.patches_uuid = string_or(identity, "patches_uuid");
  py::list errors;
  for (py::handle item : tensors) {
    const auto pair = item.cast<py::tuple>();
    const std::string key = py::str(pair[0]);
    try {
      s.parameters.emplace(key, parameter_info(pair[1], hash));
    } catch (const Error& e) {
      errors.append(key + ": " + e.name() + ": " + e.what());
    } catch (py::error_already_set& e) {
      errors.append(key + ": " + exception_type_name(e.type()) + ": " +
                    exception_message(e.value()));
    }
  }
  nlohmann::json json;
  to_json(json, s);
  return py::make_tuple(to_python(json), errors);
}

// _lora_application_report(observation) -> report dict (docs/lora.md,
// "genscope.lora_application/1")
py::object lora_report(const py::dict& obs) {
  LoraApplicationObservation o;
  o.lora_path = string_or(obs, "lora_path");
  o.baseline_unix_seconds = number_or_nan(obs, "baseline_unix_seconds");
  o.unet_before = snapshot_from_python(obs["unet_before"]);
  o.unet_after = snapshot_from_python(obs["unet_after"]);
  if (obs.contains("clip_before") && !obs["clip_before"].is_none() && obs.contains("clip_after") &&
      !obs["clip_after"].is_none()) {
    o.clip_before = snapshot_from_python(obs["clip_before"]);
    o.clip_after = snapshot_from_python(obs["clip_after"]);
  }
  o.memory_allocated_before_bytes = number_or_nan(obs, "memory_allocated_before_bytes");
  o.memory_allocated_after_bytes = number_or_nan(obs, "memory_allocated_after_bytes");
  o.memory_reserved_before_bytes = number_or_nan(obs, "memory_reserved_before_bytes");
  o.memory_reserved_after_bytes = number_or_nan(obs, "memory_reserved_after_bytes");
  o.success = obs.contains("success") && py::bool_(obs["success"]);
  o.models_returned = obs.contains("models_returned") ? obs["models_returned"].cast<int>() : 0;
  if (obs.contains("errors")) o.errors = obs["errors"].cast<std::vector<std::string>>();
  nlohmann::json report;
  {
    py::gil_scoped_release release;
    report = lora_application_report(o);
  }
  // A Python patcher's patch lists are Python objects; the integration reads them into the
  // report's patch-analysis layout (the C++ side reads its own ModelPatcher).
  for (const char* key : {"unet_lora_patches", "clip_lora_patches"}) {
    if (obs.contains(key) && !obs[key].is_none()) report[key] = from_python(obs[key]);
  }
  return to_python(report);
}

}  // namespace

void register_model(py::module_& m) {
  m.def("_model_snapshot", &model_snapshot, py::arg("identity"), py::arg("tensors"),
        py::arg("hash") = true,
        "(identity dict, iterable of (key, tensor), hash) -> (model snapshot dict, errors): "
        "the parameter table of a model, with the XXH3-64 of every tensor's bytes when `hash`.");
  m.def("_lora_application_report", &lora_report, py::arg("observation"),
        "The seed 002 LoRA application report (docs/lora.md) from before/after snapshots.");
}

}  // namespace genscope::python
