// analyze_tensor: the Step-facing wrapper (kept apart so the JSON builders link without Step).
#include <exception>
#include <string>

#include "genscope/step.hpp"
#include "genscope/tensor_analysis.hpp"

namespace genscope {

void analyze_tensor(Step& step, std::string_view name, const TensorView& view, TensorRole role,
                    const AnalysisOptions& options) noexcept {
  if (!step.active()) return;  // monitoring off: no work at all
  try {
    step.attach({"tensor", std::string(name), tensor_analysis_json(view, role, options)});
  } catch (const std::exception& e) {
    step.record_monitoring_error("tensor_analysis", std::string(name) + ": " + e.what());
  } catch (...) {
    step.record_monitoring_error("tensor_analysis", std::string(name) + ": unknown exception");
  }
}

}  // namespace genscope
