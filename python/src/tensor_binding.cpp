// step.analyze_tensor(name, array, role="other", **expectations): NumPy arrays viewed in
// place through the buffer protocol, torch tensors through detach().cpu().numpy() (bfloat16
// and float8 as raw bits with the true dtype). The analysis runs with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "genscope/error.hpp"
#include "genscope/tensor_analysis.hpp"
#include "genscope/tensor_stats.hpp"

namespace genscope::python {
namespace {

// By the dtype's type number (PyArray_Descr.type_num), not its kind and itemsize: NumPy 2
// moved `elsize` in PyArray_Descr, and pybind11 before 2.12 (Debian 12 has 2.10) reads it at
// NumPy 1's offset, so itemsize() is garbage under NumPy 2 and every float32 array was
// "unsupported". type_num (like kind and byteorder) sits before the fields NumPy 2 moved, and
// the numbers are the same in both: BOOL 0, BYTE 1, UBYTE 2, SHORT 3, USHORT 4, INT 5, UINT 6,
// LONG 7, ULONG 8, LONGLONG 9, ULONGLONG 10, FLOAT 11, DOUBLE 12, HALF 23.
std::optional<DType> numpy_dtype(const py::dtype& dt) {
  constexpr bool kLong64 = sizeof(long) == 8;
  switch (dt.num()) {
    case 0: return DType::kBool;
    case 1: return DType::kI8;
    case 2: return DType::kU8;
    case 3: return DType::kI16;
    case 4: return DType::kU16;
    case 5: return DType::kI32;
    case 6: return DType::kU32;
    case 7: return kLong64 ? DType::kI64 : DType::kI32;
    case 8: return kLong64 ? DType::kU64 : DType::kU32;
    case 9: return DType::kI64;
    case 10: return DType::kU64;
    case 11: return DType::kF32;
    case 12: return DType::kF64;
    case 23: return DType::kF16;
    default: break;
  }
  if (std::string(py::str(dt.attr("name"))) == "bfloat16") {
    return DType::kBF16;  // ml_dtypes
  }
  return std::nullopt;
}

// What the conversion needs from torch and NumPy, looked up once. A tensor is analysed right
// after the model layer that made it, with the CPU caches full of that layer: every module
// import, attribute lookup and str() here is paid cold (tens of µs each), so the hot path asks
// for object identities and C struct fields instead of names. The objects are kept for the
// life of the process (never released: no destructor runs after the interpreter is gone).
struct TorchObjects {
  py::handle tensor_type;  // torch.Tensor
  py::handle bfloat16, float8_e4m3fn, float8_e5m2, int16, uint8;
};

const TorchObjects* torch_objects() {
  static const TorchObjects* cached = nullptr;
  if (cached != nullptr) return cached;
  PyObject* torch = PyDict_GetItemString(PyImport_GetModuleDict(), "torch");
  if (torch == nullptr) return nullptr;  // torch not imported: no object can be a tensor
  py::handle t(torch);
  if (!py::hasattr(t, "Tensor")) return nullptr;  // torch still being imported
  auto keep = [&](const char* name) -> py::handle {
    return py::hasattr(t, name) ? py::object(t.attr(name)).release() : py::handle();
  };
  cached = new TorchObjects{keep("Tensor"),        keep("bfloat16"), keep("float8_e4m3fn"),
                            keep("float8_e5m2"),   keep("int16"),    keep("uint8")};
  return cached;
}

py::handle numpy_asarray() {
  static py::handle f = py::object(py::module_::import("numpy").attr("asarray")).release();
  return f;
}

py::handle numpy_ascontiguousarray() {
  static py::handle f =
      py::object(py::module_::import("numpy").attr("ascontiguousarray")).release();
  return f;
}

// Not a torch.Tensor but shaped like one from a torch module (a wrapper tensor class).
bool is_torch_like(py::handle obj) {
  const std::string module = py::str(py::type::handle_of(obj).attr("__module__"));
  return module.rfind("torch", 0) == 0 && py::hasattr(obj, "detach") &&
         py::hasattr(obj, "device") && py::hasattr(obj, "dtype");
}

// torch.Tensor -> CPU NumPy array; raw bits for dtypes NumPy lacks.
py::array torch_to_numpy(py::handle tensor, const TorchObjects& torch, HostTensor& out,
                         std::optional<DType>& raw) {
  out.framework = "torch";
  py::object t = tensor.attr("detach")();
  py::object is_cpu = py::getattr(t, "is_cpu", py::none());
  if (is_cpu.ptr() == Py_True) {
    out.view.device = "cpu";
  } else {
    out.view.device = py::str(t.attr("device"));
    if (out.view.device != "cpu") {
      t = t.attr("cpu")();
      out.zero_copy = false;
      out.note = "copied from " + out.view.device;
    }
  }
  const py::object dtype = t.attr("dtype");
  if (torch.bfloat16 && dtype.is(torch.bfloat16)) {
    raw = DType::kBF16;
    t = t.attr("view")(torch.int16);
  } else if (torch.float8_e4m3fn && dtype.is(torch.float8_e4m3fn)) {
    raw = DType::kF8E4M3;
    t = t.attr("view")(torch.uint8);
  } else if (torch.float8_e5m2 && dtype.is(torch.float8_e5m2)) {
    raw = DType::kF8E5M2;
    t = t.attr("view")(torch.uint8);
  }
  return t.attr("numpy")();
}

}  // namespace

HostTensor to_host(py::handle obj) {
  HostTensor out;
  std::optional<DType> raw;  // true dtype of raw-bit arrays
  py::object arr_obj;
  static const TorchObjects kNoTorch{};
  const TorchObjects* torch = torch_objects();
  const bool ndarray = py::isinstance<py::array>(obj);
  int is_tensor = 0;
  if (!ndarray && torch != nullptr) {
    is_tensor = PyObject_IsInstance(obj.ptr(), torch->tensor_type.ptr());
    if (is_tensor < 0) throw py::error_already_set();
  }
  if (is_tensor == 1 || (!ndarray && is_torch_like(obj))) {
    arr_obj = torch_to_numpy(obj, torch != nullptr ? *torch : kNoTorch, out, raw);
  } else {
    out.framework = "numpy";
    if (!py::isinstance<py::array>(obj)) {
      out.zero_copy = false;  // lists, scalars, objects with __array__
      out.note = "converted with numpy.asarray";
    }
    arr_obj = numpy_asarray()(obj);
  }
  py::array arr = py::reinterpret_borrow<py::array>(arr_obj);
  py::dtype dt = arr.dtype();
  if (dt.byteorder() == '>') {
    arr = numpy_ascontiguousarray()(arr, dt.attr("newbyteorder")("="));
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
    arr = numpy_ascontiguousarray()(arr);
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

// Host copies of a device tensor are made this large at most (host_piece_bytes= changes it).
constexpr std::int64_t kHostPieceBytes = 8 << 20;

// The analysis of a torch tensor copied to the host a piece at a time: a decoded video on a
// GPU (an 81-frame 720p float32 video is 0.9 GB) is not copied whole. Used for a tensor not
// on the CPU, or any torch tensor when `forced` (host_piece_bytes given), larger than
// `piece_bytes`; nullopt otherwise. Pieces run in logical order: for the first dimension k
// whose single index holds <= piece_bytes, every index of the dimensions before it and a
// range of k's indices at a time, made contiguous on the device and copied.
std::optional<nlohmann::json> analyze_in_pieces(py::handle tensor, TensorRole r,
                                                const AnalysisOptions& options,
                                                std::int64_t piece_bytes, bool forced) {
  const TorchObjects* torch = torch_objects();
  if (torch == nullptr) return std::nullopt;
  const int is_tensor = PyObject_IsInstance(tensor.ptr(), torch->tensor_type.ptr());
  if (is_tensor < 0) throw py::error_already_set();
  if (is_tensor != 1) return std::nullopt;
  py::object t = tensor.attr("detach")();
  const bool on_cpu = py::getattr(t, "is_cpu", py::none()).ptr() == Py_True;
  if (on_cpu && !forced) return std::nullopt;
  const auto esize = t.attr("element_size")().cast<std::int64_t>();
  const auto numel = t.attr("numel")().cast<std::int64_t>();
  if (numel * esize <= piece_bytes || numel == 0) return std::nullopt;
  const auto shape = t.attr("shape").cast<std::vector<std::int64_t>>();
  const std::size_t ndim = shape.size();
  // k: the first dimension whose one index (the dimensions after it) fits a piece.
  std::size_t k = 0;
  std::int64_t inner = numel;  // elements of one index of dimension k
  while (k + 1 < ndim && inner / shape[k] * esize > piece_bytes) inner /= shape[k++];
  inner /= shape[k];
  const std::int64_t per_piece = std::max<std::int64_t>(1, piece_bytes / (inner * esize));
  std::optional<StatsAccumulator> acc;
  TensorView whole;
  whole.shape = shape;
  std::int64_t pieces = 0, largest = 0;
  std::vector<std::int64_t> index(k, 0);  // over the dimensions before k
  // One host buffer, refilled by each piece's copy_ (device to host, strided to contiguous):
  // the host holds one piece at a time, and no allocation per piece.
  py::object buffer = t.attr("new_empty")(py::make_tuple(std::min(per_piece, shape[k]) * inner),
                                          py::arg("device") = "cpu");
  for (bool more = true; more;) {
    py::object outer = t;
    for (std::int64_t i : index) outer = outer[py::int_(i)];
    for (std::int64_t start = 0; start < shape[k]; start += per_piece) {
      const std::int64_t len = std::min(per_piece, shape[k] - start);
      py::object source = outer.attr("narrow")(0, start, len);
      py::object piece = buffer.attr("narrow")(0, 0, len * inner).attr("view")(source.attr("shape"));
      piece.attr("copy_")(source);
      HostTensor host;
      std::optional<DType> raw;
      py::array arr = py::reinterpret_borrow<py::array>(torch_to_numpy(piece, *torch, host, raw));
      const std::optional<DType> d = raw ? raw : numpy_dtype(arr.dtype());
      if (!d) {
        throw Error("UnsupportedDType",
                    "dtype " + std::string(py::str(arr.dtype())) + " is not supported");
      }
      if (!acc) {
        acc.emplace(*d, options.stats.hash);
        whole.dtype = *d;
        whole.device = py::str(t.attr("device"));
      }
      TensorView view{.data = arr.data(), .shape = {arr.size()}, .dtype = *d};
      {
        py::gil_scoped_release release;
        acc->add(view);
      }
      ++pieces;
      largest = std::max<std::int64_t>(largest, arr.nbytes());
    }
    more = false;  // next index of the dimensions before k (odometer)
    for (std::size_t j = k; j-- > 0;) {
      if (++index[j] < shape[j]) {
        more = true;
        break;
      }
      index[j] = 0;
    }
  }
  nlohmann::json data;
  {
    py::gil_scoped_release release;
    data = tensor_analysis_json(whole, r, options, acc->finish());
  }
  data["origin"] = {{"framework", "torch"},
                    {"zero_copy", false},
                    {"note", "copied from " + whole.device +
                                 " in " + std::to_string(pieces) + " pieces of at most " +
                                 std::to_string(largest) + " bytes"},
                    {"pieces", pieces},
                    {"piece_bytes", largest}};
  return data;
}

// Converts and analyses; the analysis goes to attach(), conversion and analysis failures
// to error(). Runs the analysis with the GIL released.
template <class Attach, class Error_>
void analyze_into(const std::string& name, py::handle tensor, TensorRole r,
                  const AnalysisOptions& options, Attach&& attach, Error_&& error,
                  std::optional<std::int64_t> piece_bytes = std::nullopt) {
  HostTensor host;
  try {
    std::optional<nlohmann::json> pieces = analyze_in_pieces(
        tensor, r, options, piece_bytes.value_or(kHostPieceBytes), piece_bytes.has_value());
    if (pieces) {
      attach(Attachment{"tensor", name, std::move(*pieces)});
      return;
    }
    host = to_host(tensor);
  } catch (const Error& e) {
    error(name + ": " + e.name() + ": " + e.what());
    return;
  } catch (py::error_already_set& e) {
    error(name + ": conversion failed: " + exception_type_name(e.type()) + ": " +
          exception_message(e.value()));
    return;
  }
  py::gil_scoped_release release;  // host.array keeps the memory alive
  try {
    nlohmann::json data = tensor_analysis_json(host.view, r, options);
    data["origin"] = {{"framework", host.framework},
                      {"zero_copy", host.zero_copy},
                      {"note", host.note.empty() ? nlohmann::json() : nlohmann::json(host.note)}};
    attach(Attachment{"tensor", name, std::move(data)});
  } catch (const Error& e) {
    error(name + ": " + e.name() + ": " + e.what());
  } catch (const std::exception& e) {
    error(name + ": " + e.what());
  }
}

// step.analyze_tensor: attaches to the step (while it records).
// host_piece_bytes= (a positive int), taken out of the expectations.
std::optional<std::int64_t> take_piece_bytes(py::kwargs& kwargs) {
  if (!kwargs.contains("host_piece_bytes")) return std::nullopt;
  const auto bytes = py::object(kwargs["host_piece_bytes"]).cast<std::int64_t>();
  PyDict_DelItemString(kwargs.ptr(), "host_piece_bytes");
  if (bytes <= 0) throw Error("InvalidArgument", "host_piece_bytes must be positive");
  return bytes;
}

void analyze(PyStep& self, const std::string& name, py::handle tensor, const std::string& role,
             py::kwargs kwargs) {
  const TensorRole r = parse_role(role);
  const std::optional<std::int64_t> piece_bytes = take_piece_bytes(kwargs);
  const AnalysisOptions options = parse_expectations(kwargs);  // argument errors raise
  Step& step = self.get();
  if (!step.active()) return;
  analyze_into(
      name, tensor, r, options, [&](Attachment a) { step.attach(std::move(a)); },
      [&](const std::string& m) { step.record_monitoring_error("tensor_analysis", m); },
      piece_bytes);
}

// run.analyze_tensor_into(step_id, ...): attaches to a step of the run, also an ended one.
bool analyze_into_step(PyRun& self, int step_id, const std::string& name, py::handle tensor,
                       const std::string& role, py::kwargs kwargs) {
  const TensorRole r = parse_role(role);
  const std::optional<std::int64_t> piece_bytes = take_piece_bytes(kwargs);
  const AnalysisOptions options = parse_expectations(kwargs);
  if (self.finished()) return false;
  ActiveRun& run = self.active();
  bool attached = false;
  analyze_into(
      name, tensor, r, options,
      [&](Attachment a) { attached = run.attach_to_step(step_id, std::move(a)); },
      [&](const std::string& m) { run.record_monitoring_error("tensor_analysis", m); },
      piece_bytes);
  return attached;
}

std::vector<std::int64_t> shape_arg(const py::object& shape) {
  return shape.is_none() ? std::vector<std::int64_t>{} : shape.cast<std::vector<std::int64_t>>();
}

// audio: None = not known, () = the denoiser received no audio context, or its shape.
PipelineTensors pipeline_tensors(const py::object& context, const py::object& pooled,
                                 const py::object& latent, const py::object& source,
                                 const py::object& audio) {
  PipelineTensors t{shape_arg(context), shape_arg(pooled), shape_arg(latent), {}};
  if (!audio.is_none()) t.audio_context = shape_arg(audio);
  const std::vector<std::int64_t> src = shape_arg(source);
  if (src.size() >= 2) t.source.height = src[0], t.source.width = src[1];
  if (src.size() >= 3) t.source.frames = src[2];
  return t;
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
  m.def(
      "_family_verdict",
      [](const py::object& context, const py::object& pooled, const py::object& latent,
         const py::object& source, const py::object& audio) {
        return to_python(family_verdict_json(
            classify_pipeline(pipeline_tensors(context, pooled, latent, source, audio))));
      },
      py::arg("context") = py::none(), py::arg("pooled") = py::none(),
      py::arg("latent") = py::none(), py::arg("source") = py::none(),
      py::arg("audio") = py::none(),
      "The family verdict (dict) of the shapes a pipeline's denoiser was seen with (audio: "
      "the audio context's shape, () for none received, None when not known).");
  m.def(
      "_resolve_family",
      [](const std::string& name, const py::object& context, const py::object& pooled,
         const py::object& latent, const py::object& audio) {
        const std::optional<ModelFamily> f =
            resolve_family(name, pipeline_tensors(context, pooled, latent, py::none(), audio));
        if (!f) throw Error("UnknownFamily", "unknown model family '" + name + "'");
        return std::string(family_name(*f));
      },
      py::arg("name"), py::arg("context") = py::none(), py::arg("pooled") = py::none(),
      py::arg("latent") = py::none(), py::arg("audio") = py::none(),
      "The family display name an alias ('wan2.2', 'ltx2') means for these shapes.");
  py::class_<PyRun> run_class = py::reinterpret_borrow<py::class_<PyRun>>(m.attr("Run"));
  run_class.def("analyze_tensor_into", &analyze_into_step, py::arg("step_id"), py::arg("name"),
                py::arg("tensor"), py::arg("role") = "other",
                "Like Step.analyze_tensor, attached to step `step_id` of this run, also after "
                "it ended. Returns whether it was attached.");
  py::class_<PyStep> step_class = py::reinterpret_borrow<py::class_<PyStep>>(m.attr("Step"));
  step_class.def("analyze_tensor", &analyze, py::arg("name"), py::arg("tensor"),
                 py::arg("role") = "other",
                 "Attaches statistics, classification, flags and checks of a NumPy array or "
                 "torch tensor. Expectations: family, expected_device, expected_dtype, source="
                 "(h, w[, frames]), height, width, frames, memory_threshold_bytes, "
                 "pooled_shape, hash, threads. A torch tensor off the CPU larger than 8 MiB "
                 "is copied to the host in pieces of at most that size; host_piece_bytes=N "
                 "sets the size and applies it to any torch tensor.");
}

}  // namespace genscope::python
