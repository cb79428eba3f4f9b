// The extension module genscope._genscope: the error type, JSON conversion, run documents
// (write_run / read_run / render_report) and the registration of every wrapper class.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "genscope/distributed.hpp"
#include "genscope/error.hpp"
#include "genscope/html_report.hpp"
#include "genscope/metrics.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"
#include "genscope/version.hpp"

namespace genscope::python {
namespace {

std::atomic<bool> g_finalizing{false};

// genscope.Error, created once at import; kept for the life of the process.
PyObject* g_error_type = nullptr;

void raise_error(const Error& e) {
  py::object type = py::reinterpret_borrow<py::object>(g_error_type);
  py::object instance = type(e.name() + ": " + e.what());
  instance.attr("name") = e.name();
  instance.attr("message") = std::string(e.what());
  PyErr_SetObject(g_error_type, instance.ptr());
}

// A run document dict, or a genscope ActiveRun (finished or not), as a Run value.
Run run_from_python(py::handle doc_or_run) {
  if (py::isinstance<PyRun>(doc_or_run)) return doc_or_run.cast<PyRun&>().current();
  if (!py::isinstance<py::dict>(doc_or_run)) {
    throw Error("InvalidArgument",
                "expected a run document (dict) or a genscope Run, got " +
                    std::string(py::str(py::type::handle_of(doc_or_run).attr("__name__"))));
  }
  const nlohmann::json document = from_python(doc_or_run);
  py::gil_scoped_release release;
  return run_from_json(document);
}

}  // namespace

bool python_finalizing() noexcept { return g_finalizing.load(std::memory_order_acquire); }

std::string exception_type_name(py::handle type) {
  try {
    const std::string qualname = py::str(type.attr("__qualname__"));
    const std::string module = py::str(type.attr("__module__"));
    if (module.empty() || module == "builtins") return qualname;
    return module + "." + qualname;
  } catch (const py::error_already_set&) {
    return "exception";
  }
}

std::string exception_message(py::handle value) {
  if (value.is_none()) return {};
  try {
    return py::str(value);
  } catch (const py::error_already_set&) {
    return "<unprintable exception>";
  }
}

// Built directly with the C API (no JSON text in between: the document of a generation is
// converted in a third of the time of dump + json.loads). The result is what json.loads of
// the document's text gives: dicts with sorted keys, lists, int, float, str, bool, None;
// NaN and infinities, which JSON cannot carry, become None; invalid UTF-8 becomes U+FFFD.
py::object to_python(const nlohmann::json& value) {
  using T = nlohmann::json::value_t;
  PyObject* out = nullptr;
  switch (value.type()) {
    case T::boolean:
      return py::bool_(value.get<bool>());
    case T::number_integer:
      out = PyLong_FromLongLong(value.get<std::int64_t>());
      break;
    case T::number_unsigned:
      out = PyLong_FromUnsignedLongLong(value.get<std::uint64_t>());
      break;
    case T::number_float: {
      const double d = value.get<double>();
      if (!std::isfinite(d)) return py::none();
      out = PyFloat_FromDouble(d);
      break;
    }
    case T::string: {
      const auto& s = value.get_ref<const std::string&>();
      out = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
      break;
    }
    case T::array: {
      py::list list(value.size());
      Py_ssize_t i = 0;
      for (const auto& item : value) {
        PyList_SET_ITEM(list.ptr(), i++, to_python(item).release().ptr());
      }
      return list;
    }
    case T::object: {
      py::dict dict;
      for (const auto& [key, item] : value.items()) {
        py::object k = py::reinterpret_steal<py::object>(
            PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), "replace"));
        if (!k) throw py::error_already_set();
        if (PyDict_SetItem(dict.ptr(), k.ptr(), to_python(item).ptr()) != 0) {
          throw py::error_already_set();
        }
      }
      return dict;
    }
    default:  // null, discarded, binary (never in a document)
      return py::none();
  }
  if (out == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(out);
}

nlohmann::json from_python(py::handle value) {
  // default=str keeps non-JSON values (numpy scalars, paths) readable instead of failing.
  const std::string text = py::str(py::module_::import("json").attr("dumps")(
      value, py::arg("default") = py::module_::import("builtins").attr("str")));
  return nlohmann::json::parse(text);
}

py::object run_to_python(const Run& run) {
  nlohmann::json document;
  {
    py::gil_scoped_release release;
    document = to_json(run);
  }
  return to_python(document);
}

}  // namespace genscope::python

PYBIND11_MODULE(_genscope, m) {
  namespace gp = genscope::python;
  namespace py = pybind11;
  m.doc() = "genscope: monitoring and validation of generative diffusion pipelines";
  m.attr("__version__") = std::string(genscope::version());

  static py::exception<genscope::Error> error_type(m, "Error");
  gp::g_error_type = error_type.ptr();
  error_type.attr("__doc__") =
      "A genscope user error; .name is the stable error name, .message the explanation.";
  error_type.attr("name") = "";
  error_type.attr("message") = "";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const genscope::Error& e) {
      gp::raise_error(e);
    } catch (const nlohmann::json::exception& e) {
      gp::raise_error(genscope::Error("InvalidJson", e.what()));
    }
  });

  gp::register_monitor(m);
  gp::register_step(m);
  gp::register_tensor(m);
  gp::register_model(m);

  m.def(
      "write_run",
      [](py::handle doc_or_run, const std::string& path) {
        genscope::Run run = gp::run_from_python(doc_or_run);
        py::gil_scoped_release release;
        genscope::write_run_file(run, path);
      },
      py::arg("doc_or_run"), py::arg("path"),
      "Writes a run document (dict) or a Run atomically to `path`.");
  m.def(
      "read_run",
      [](const std::string& path) {
        genscope::Run run;
        {
          py::gil_scoped_release release;
          run = genscope::read_run_file(path);
        }
        return gp::run_to_python(run);
      },
      py::arg("path"), "Reads a run document file and returns it as a dict.");
  m.def(
      "render_report",
      [](py::handle doc_or_run, bool plain, bool series) {
        genscope::Run run = gp::run_from_python(doc_or_run);
        py::gil_scoped_release release;
        return genscope::render_console(run, {.plain = plain, .series = series});
      },
      py::arg("doc_or_run"), py::arg("plain") = false, py::arg("series") = false,
      "Renders the console report of a run document (dict) or a Run.");

  m.def(
      "render_html",
      [](py::handle docs_or_runs, const std::string& title) {
        // One document or Run, or a list of them (overlaid in one page).
        std::vector<genscope::Run> runs;
        if (py::isinstance<py::list>(docs_or_runs) || py::isinstance<py::tuple>(docs_or_runs)) {
          for (py::handle item : docs_or_runs) runs.push_back(gp::run_from_python(item));
        } else {
          runs.push_back(gp::run_from_python(docs_or_runs));
        }
        if (runs.empty()) throw genscope::Error("InvalidArgument", "render_html needs at least one run");
        py::gil_scoped_release release;
        return genscope::render_html_report(std::span<const genscope::Run>(runs), {.title = title});
      },
      py::arg("doc_or_run"), py::arg("title") = "",
      "Renders the self-contained HTML report of a run document (dict) or Run, or of a list "
      "of them; `title` empty: 'genscope report: <pipeline name>'.");
  m.def(
      "distributed_from_environment",
      []() -> py::object {
        std::string problem;
        const std::optional<genscope::DistributedInfo> d = genscope::distributed_from_environment(&problem);
        if (!d) return py::none();
        py::dict out;
        out["role"] = d->role;
        out["rank"] = d->rank;
        out["world_size"] = d->world_size;
        out["local_rank"] = d->local_rank;
        out["node_rank"] = d->node_rank;
        out["group"] = d->group;
        out["group_source"] = d->group_source;
        return std::move(out);
      },
      "The distributed identity this process's environment gives (RANK, WORLD_SIZE, "
      "LOCAL_RANK, GROUP_RANK, TORCHELASTIC_RUN_ID, MASTER_ADDR, MASTER_PORT, "
      "GENSCOPE_DISTRIBUTED_GROUP) as the run document's 'distributed' dict; None when none.");
  m.def(
      "render_metrics",
      [](py::handle doc_or_run, bool openmetrics) {
        genscope::Run run = gp::run_from_python(doc_or_run);
        py::gil_scoped_release release;
        return genscope::render_metrics(run, openmetrics ? genscope::MetricsFormat::kOpenMetrics
                                                         : genscope::MetricsFormat::kPrometheusText);
      },
      py::arg("doc_or_run"), py::arg("openmetrics") = false,
      "The final figures of a run as a Prometheus text 0.0.4 exposition (OpenMetrics 1.0.0 "
      "with openmetrics=True); names as docs/metrics.md.");

  // Python callbacks must stop taking the GIL once the interpreter starts finalizing.
  py::module_::import("atexit").attr("register")(
      py::cpp_function([]() { gp::g_finalizing.store(true, std::memory_order_release); }));
}
