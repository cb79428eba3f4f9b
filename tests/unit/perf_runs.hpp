// Crafted Runs shared by the perf unit tests (perf_test.cpp, compare_test.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "genscope/run.hpp"
#include "genscope/validation.hpp"

namespace genscope::testing_runs {
inline constexpr std::int64_t kSec = 1'000'000'000;

inline StepRecord make_step(int id, std::string name, StepKind kind, std::int64_t start_ns,
                     std::int64_t duration_ns) {
  StepRecord s;
  s.id = id;
  s.name = std::move(name);
  s.kind = kind;
  s.status = StepStatus::kOk;
  s.start_offset_ns = start_ns;
  s.duration_ns = duration_ns;
  return s;
}

inline MetricFigures figure(std::string name, double before, double peak, double after) {
  MetricFigures m;
  m.name = std::move(name);
  m.before = before;
  m.peak = peak;
  m.after = after;
  return m;
}

// A 3-step run: loading 1 s, sampling `sampling_ns` (20 equal iterations), decode 0.5 s.
inline genscope::Run make_run(std::int64_t sampling_ns, std::string architecture = "MMDiT") {
  genscope::Run run;
  run.id = "run";
  run.pipeline.name = "qwen-image";
  run.pipeline.architecture = std::move(architecture);
  run.steps.push_back(make_step(0, "load", StepKind::kModelLoading, 0, kSec));
  auto sampling = make_step(1, "sampling", StepKind::kSampling, kSec, sampling_ns);
  for (int i = 0; i < 20; ++i) sampling.iteration_ns.push_back(sampling_ns / 20);
  sampling.metrics.push_back(figure("gpu0.used_bytes", 10e9, 20e9, 12e9));
  sampling.metrics.push_back(figure("gpu0.total_bytes", 80e9, 80e9, 80e9));
  run.steps.push_back(sampling);
  run.steps.push_back(make_step(2, "decode", StepKind::kVaeDecode, kSec + sampling_ns, kSec / 2));
  run.duration_ns = kSec + sampling_ns + kSec / 2;
  return run;
}

inline bool has_diagnostic(const Validation& v, const std::string& id) {
  for (const auto& d : v.diagnostics)
    if (d.id == id) return true;
  return false;
}

inline const Diagnostic& find_diagnostic(const std::vector<Diagnostic>& list, const std::string& id) {
  for (const auto& d : list)
    if (d.id == id) return d;
  throw std::runtime_error("diagnostic not found: " + id);
}

}  // namespace genscope::testing_runs
