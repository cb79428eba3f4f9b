// step.analyze_tensor(name, array, role="other", **expectations): NumPy arrays viewed in
// place through the buffer protocol, torch tensors through detach().cpu().numpy() (bfloat16
// and float8 as raw bits with the true dtype). The analysis runs with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "genscope/error.hpp"
#include "genscope/tensor_analysis.hpp"

namespace genscope::python {
namespace {

std::optional<DType> numpy_dtype(const py::dtype& dt) {
  const char kind = dt.kind();
  const auto size = dt.itemsize();
  const std::string name = py::str(dt.attr("name"));
  if (name == "bfloat16") return DType::kBF16;  // ml_dtypes
  if (kind == 'f') {
    if (size == 8) return DType::kF64;
    if (size == 4) return DType::kF32;
    if (size == 2) return DType::kF16;
  } else if (kind == 'i') {
    if (size == 8) return DType::kI64;
    if (size == 4) return DType::kI32;
    if (size == 2) return DType::kI16;
    if (size == 1) return DType::kI8;
  } else if (kind == 'u') {
    if (size == 8) return DType::kU64;
    if (size == 4) return DType::kU32;
    if (size == 2) return DType::kU16;
    if (size == 1) return DType::kU8;
  } else if (kind == 'b') {
    return DType::kBool;
  }
  return std::nullopt;
}

bool is_torch_tensor(py::handle obj) {
  const std::string module = py::str(obj.get_type().attr("__module__"));
  return module.rfind("torch", 0) == 0 && py::hasattr(obj, "detach") &&
         py::hasattr(obj, "device") && py::hasattr(obj, "dtype");
}

// torch.Tensor -> CPU NumPy array; raw bits for dtypes NumPy lacks.
py::array torch_to_numpy(py::handle tensor, HostTensor& out, std::optional<DType>& raw) {
  py::module_ torch = py::module_::import("torch");
  out.framework = "torch";
  out.view.device = py::str(tensor.attr("device"));
  py::object t = tensor.attr("detach")();
  if (out.view.device != "cpu") {
    t = t.attr("cpu")();
    out.zero_copy = false;
    out.note = "copied from " + out.view.device;
  }
  const std::string dtype = py::str(t.attr("dtype"));
  if (dtype == "torch.bfloat16") {
    raw = DType::kBF16;
    t = t.attr("view")(torch.attr("int16"));
  } else if (dtype == "torch.float8_e4m3fn") {
    raw = DType::kF8E4M3;
    t = t.attr("view")(torch.attr("uint8"));
  } else if (dtype == "torch.float8_e5m2") {
    raw = DType::kF8E5M2;
    t = t.attr("view")(torch.attr("uint8"));
  }
  return t.attr("numpy")();
}

}  // namespace

HostTensor to_host(py::handle obj) {
  HostTensor out;
  std::optional<DType> raw;  // true dtype of raw-bit arrays
  py::module_ np = py::module_::import("numpy");
  py::object arr_obj;
  if (is_torch_tensor(obj)) {
    arr_obj = torch_to_numpy(obj, out, raw);
  } else {
    out.framework = "numpy";
    if (!py::isinstance<py::array>(obj)) {
      out.zero_copy = false;  // lists, scalars, objects with __array__
      out.note = "converted with numpy.asarray";
    }
    arr_obj = np.attr("asarray")(obj);
  }
  py::array arr = py::reinterpret_borrow<py::array>(arr_obj);
  py::dtype dt = arr.dtype();
  if (std::string(py::str(dt.attr("byteorder"))) == ">") {
    arr = np.attr("ascontiguousarray")(arr, dt.attr("newbyteorder")("="));
    dt = arr.dtype();
    out.zero_copy = false;
    out.note = "byte-swapped to native order";
  }
  const std::optional<DType> d = raw ? raw : numpy_dtype(dt);
  if (!d) {
    throw Error("UnsupportedDType", "dtype " + std::string(py::str(dt)) + " is not supported");
  }
  const auto item = static_cast<py::ssize_t>(dtype_size(*d));
  bool whole_elements = true;
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) whole_elements &= arr.strides(i) % item == 0;
  if (!whole_elements) {  // e.g. a field of a structured array
    arr = np.attr("ascontiguousarray")(arr);
    out.zero_copy = false;
    out.note = "strides not a multiple of the element size: contiguous copy";
  }
  out.view.dtype = *d;
  out.view.data = arr.data();
  for (py::ssize_t i = 0; i < arr.ndim(); ++i) {
    out.view.shape.push_back(arr.shape(i));
    out.view.strides.push_back(arr.strides(i) / item);
  }
  if (out.view.is_contiguous()) out.view.strides.clear();
  out.array = std::move(arr);
  return out;
}

namespace {

TensorRole parse_role(const std::string& role) {
  for (TensorRole r : {TensorRole::kConditioning, TensorRole::kPooled, TensorRole::kLatent,
                       TensorRole::kImage, TensorRole::kOther}) {
    if (role_name(r) == role) return r;
  }
  throw Error("UnknownRole",
              "unknown tensor role '" + role + "' (conditioning, pooled, latent, image, other)");
}

}  // namespace

DType parse_dtype_name(std::string name) {
  if (name.rfind("torch.", 0) == 0) name = name.substr(6);
  static const std::pair<const char*, DType> kAliases[] = {{"float64", DType::kF64},
                                                           {"double", DType::kF64},
                                                           {"float32", DType::kF32},
                                                           {"float", DType::kF32},
                                                           {"fp32", DType::kF32},
                                                           {"float16", DType::kF16},
                                                           {"half", DType::kF16},
                                                           {"fp16", DType::kF16},
                                                           {"bfloat16", DType::kBF16},
                                                           {"bf16", DType::kBF16},
                                                           {"float8_e4m3fn", DType::kF8E4M3},
                                                           {"float8_e5m2", DType::kF8E5M2},
                                                           {"int64", DType::kI64},
                                                           {"int32", DType::kI32},
                                                           {"int16", DType::kI16},
                                                           {"int8", DType::kI8},
                                                           {"uint8", DType::kU8},
                                                           {"uint16", DType::kU16},
                                                           {"uint32", DType::kU32},
                                                           {"uint64", DType::kU64},
                                                           {"bool", DType::kBool}};
  for (const auto& [alias, d] : kAliases) {
    if (name == alias) return d;
  }
  if (std::optional<DType> d = parse_dtype(name)) return *d;
  throw Error("UnknownDType", "unknown dtype '" + name + "'");
}

namespace {

AnalysisOptions parse_expectations(const py::kwargs& kwargs) {
  AnalysisOptions o;
  for (auto [key_handle, value] : kwargs) {
    const std::string key = py::str(key_handle);
    if (key == "family" || key == "declared_family") {
      const std::string name = py::str(value);
      o.declared_family = parse_family(name);
      if (!o.declared_family) throw Error("UnknownFamily", "unknown model family '" + name + "'");
    } else if (key == "expected_device") {
      o.expected_device = py::str(value);
    } else if (key == "expected_dtype") {
      o.expected_dtype = parse_dtype_name(py::str(value));
    } else if (key == "source") {  // (height, width) or (height, width, frames)
      const auto dims = value.cast<std::vector<std::int64_t>>();
      if (dims.size() < 2 || dims.size() > 3) {
        throw Error("InvalidArgument", "source must be (height, width[, frames])");
      }
      o.source.height = dims[0];
      o.source.width = dims[1];
      if (dims.size() == 3) o.source.frames = dims[2];
    } else if (key == "height") {
      o.source.height = value.cast<std::int64_t>();
    } else if (key == "width") {
      o.source.width = value.cast<std::int64_t>();
    } else if (key == "frames") {
      o.source.frames = value.cast<std::int64_t>();
    } else if (key == "memory_threshold_bytes") {
      o.memory_threshold_bytes = value.cast<std::int64_t>();
    } else if (key == "pooled_shape") {
      o.pooled_shape = value.cast<std::vector<std::int64_t>>();
    } else if (key == "hash") {
      o.stats.hash = value.cast<bool>();
    } else if (key == "threads") {
      o.stats.threads = value.cast<unsigned>();
    } else {
      throw py::type_error("analyze_tensor() got an unexpected keyword argument '" + key + "'");
    }
  }
  return o;
}

// Converts, analyses and attaches; conversion and analysis failures become monitoring errors.
void analyze(PyStep& self, const std::string& name, py::handle tensor, const std::string& role,
             const py::kwargs& kwargs) {
  const TensorRole r = parse_role(role);
  const AnalysisOptions options = parse_expectations(kwargs);  // argument errors raise
  Step& step = self.get();
  if (!step.active()) return;
  HostTensor host;
  try {
    host = to_host(tensor);
  } catch (const Error& e) {
    step.record_monitoring_error("tensor_analysis", name + ": " + e.name() + ": " + e.what());
    return;
  } catch (py::error_already_set& e) {
    step.record_monitoring_error(
        "tensor_analysis", name + ": conversion failed: " + exception_type_name(e.type()) + ": " +
                               exception_message(e.value()));
    return;
  }
  py::gil_scoped_release release;  // host.array keeps the memory alive
  try {
    nlohmann::json data = tensor_analysis_json(host.view, r, options);
    data["origin"] = {{"framework", host.framework},
                      {"zero_copy", host.zero_copy},
                      {"note", host.note.empty() ? nlohmann::json() : nlohmann::json(host.note)}};
    step.attach(Attachment{"tensor", name, std::move(data)});
  } catch (const Error& e) {
    step.record_monitoring_error("tensor_analysis", name + ": " + e.name() + ": " + e.what());
  } catch (const std::exception& e) {
    step.record_monitoring_error("tensor_analysis", name + ": " + e.what());
  }
}

}  // namespace

void register_tensor(py::module_& m) {
  m.def(
      "_check_family",
      [](const std::string& name) {
        if (!parse_family(name))
          throw Error("UnknownFamily", "unknown model family '" + name + "'");
      },
      py::arg("name"), "Raises genscope.Error('UnknownFamily') for an unknown family name.");
  py::class_<PyStep> step_class = py::reinterpret_borrow<py::class_<PyStep>>(m.attr("Step"));
  step_class.def("analyze_tensor", &analyze, py::arg("name"), py::arg("tensor"),
                 py::arg("role") = "other",
                 "Attaches statistics, classification, flags and checks of a NumPy array or "
                 "torch tensor. Expectations: family, expected_device, expected_dtype, source="
                 "(h, w[, frames]), height, width, frames, memory_threshold_bytes, "
                 "pooled_shape, hash, threads.");
}

}  // namespace genscope::python
