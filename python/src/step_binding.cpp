// genscope.Step (a context manager around a Step scope) and genscope.Attempt (one strategy of
// a fallback chain: an exception inside marks it failed and is suppressed).
#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <thread>

#include "bindings.hpp"
#include "genscope/error.hpp"

namespace genscope::python {
namespace {

// Exception (and its subclasses) are suppressed by an attempt; KeyboardInterrupt, SystemExit
// and GeneratorExit always propagate.
bool is_ordinary_exception(py::handle type) {
  return PyType_Check(type.ptr()) && PyObject_IsSubclass(type.ptr(), PyExc_Exception) == 1;
}

std::string describe(py::handle type, py::handle value) {
  const std::string message = exception_message(value);
  const std::string name = exception_type_name(type);
  return message.empty() ? name : name + ": " + message;
}

}  // namespace

PyStep::~PyStep() {
  if (!step_.active()) return;
  if (python_finalizing()) {
    // Destroyed while the interpreter exits: the code inside the step never ended it (an
    // exit from inside the step, a step opened without `with`). Not an "ok" step.
    step_.fail("the Python interpreter exited with the step open", "InterpreterExit");
  } else if (std::this_thread::get_id() != owner_) {  // garbage-collected on another thread
    step_.record_monitoring_error("python", "step ended by garbage collection on another thread");
  }
  py::gil_scoped_release release;  // ending samples the probes
  step_.end();
}

void PyStep::end(std::optional<std::int64_t> at_ns) {
  if (!step_.active()) return;
  if (std::this_thread::get_id() != owner_) {
    throw Error("StepWrongThread", "a step must be ended by the thread that opened it");
  }
  py::gil_scoped_release release;
  if (at_ns) {
    step_.end_at(*at_ns, "explicit");
  } else {
    step_.end();
  }
}

void register_step(py::module_& m) {
  py::class_<PyStep>(m, "Step",
                     "A pipeline step; records duration, memory, iterations, counters. "
                     "Used as `with run.step(kind, name) as step:`.")
      .def("__enter__", [](py::object self) { return self; })
      .def(
          "__exit__",
          [](PyStep& self, py::handle type, py::handle value, py::handle) {
            if (!type.is_none() && self.get().active()) {
              self.get().fail(exception_message(value), exception_type_name(type));
            }
            self.end();
            return false;  // the pipeline's exception propagates unchanged
          },
          "Ends the step; an exception is recorded (type and message) and propagates.")
      .def("end", &PyStep::end, py::arg("at_ns") = py::none(),
           "Ends the step now (idempotent); `at_ns` (time.monotonic_ns(), not before its "
           "start): when it ended, when that moment was noted before (its figures are taken "
           "now).")
      .def(
          "mark_iteration", [](PyStep& self) { self.get().mark_iteration(); },
          "Records one iteration: the time since the previous mark (or begin_iterations()).")
      .def(
          "begin_iterations", [](PyStep& self) { self.get().begin_iterations(); },
          "Restarts the iteration clock (just before the denoising loop).")
      .def(
          "add_counter",
          [](PyStep& self, const std::string& name, double value) {
            self.get().add_counter(name, value);
          },
          py::arg("name"), py::arg("value") = 1.0,
          "Adds to a work counter (items, frames, bytes, characters, tokens, ...).")
      .def(
          "label",
          [](PyStep& self, const std::string& key, py::handle value) {
            self.get().label(key, std::string(py::str(value)));
          },
          py::arg("key"), py::arg("value"), "Sets a label (the value is converted with str()).")
      .def(
          "skip", [](PyStep& self, const std::string& reason) { self.get().skip(reason); },
          py::arg("reason"), "Marks the step skipped.")
      .def(
          "fail",
          [](PyStep& self, const std::string& message, const std::string& type) {
            self.get().fail(message, type);
          },
          py::arg("message"), py::arg("type") = "", "Marks the step failed with a reason.")
      .def(
          "record_monitoring_error",
          [](PyStep& self, const std::string& source, const std::string& message) {
            self.get().record_monitoring_error(source, message);
          },
          py::arg("source"), py::arg("message"), "Records a monitoring failure (never raises).")
      .def(
          "attach",
          [](PyStep& self, const std::string& type, const std::string& name, py::handle data) {
            nlohmann::json json;
            try {
              json = from_python(data);
            } catch (const nlohmann::json::exception& e) {  // NaN/Infinity have no JSON form
              self.get().record_monitoring_error("attach", name + ": " + e.what());
              return;
            }
            self.get().attach(Attachment{type, name, std::move(json)});
          },
          py::arg("type"), py::arg("name"), py::arg("data"),
          "Attaches a JSON-serialisable analysis {type, name, data}; data with NaN/Infinity "
          "is recorded as a monitoring error instead.")
      .def(
          "attempt",
          [](py::object self, const std::string& strategy) {
            PyAttempt a;
            a.step = std::move(self);
            a.strategy = strategy;
            return a;
          },
          py::arg("strategy"),
          "One strategy of a fallback chain: `with step.attempt('tiled') as a:`; an exception "
          "inside marks it failed and is suppressed; a.ok tells whether it succeeded.")
      .def_property_readonly(
          "active", [](PyStep& self) { return self.get().active(); },
          "True while the step records (monitor enabled, not ended).")
      .def_property_readonly(
          "id", [](PyStep& self) { return self.get().id(); },
          "Step id within the run; -1 when inactive.");

  py::class_<PyAttempt>(m, "Attempt", "One strategy of a fallback chain.")
      .def("__enter__",
           [](py::object self) {
             PyAttempt& a = self.cast<PyAttempt&>();
             a.done = false;
             a.ok = false;
             a.error.clear();
             a.start_ns = Step::now_ns();
             return self;
           })
      .def("__exit__",
           [](PyAttempt& a, py::handle type, py::handle value, py::handle) {
             a.duration_ns = Step::now_ns() - a.start_ns;
             a.done = true;
             a.ok = type.is_none();
             if (!a.ok) a.error = describe(type, value);
             PyStep& step = a.step.cast<PyStep&>();
             step.get().record_attempt(a.strategy, a.ok ? StepStatus::kOk : StepStatus::kFailed,
                                       a.error, a.duration_ns);
             return !a.ok && is_ordinary_exception(type);  // True suppresses
           })
      .def_property_readonly(
          "ok", [](const PyAttempt& a) { return a.done && a.ok; },
          "True once the block finished without an exception.")
      .def_readonly("done", &PyAttempt::done, "True once the block has exited.")
      .def_readonly("error", &PyAttempt::error, "'Type: message' of the failure; '' when ok.")
      .def_readonly("strategy", &PyAttempt::strategy)
      .def_readonly("duration_ns", &PyAttempt::duration_ns)
      .def("__bool__", [](const PyAttempt& a) { return a.done && a.ok; });
}

}  // namespace genscope::python
