// analyze_tensor: the Step-facing wrapper (kept apart so the JSON builders link without Step).
#include <exception>
#include <filesystem>
#include <string>

#include "genscope/npy.hpp"
#include "genscope/safetensors.hpp"
#include "genscope/step.hpp"
#include "genscope/tensor_analysis.hpp"

namespace genscope {

void analyze_tensor(Step& step, std::string_view name, const TensorView& view, TensorRole role,
                    const AnalysisOptions& options) noexcept {
  if (!step.active()) return;  // monitoring off: no work at all
  try {
    nlohmann::json analysis = tensor_analysis_json(view, role, options);
    if (const auto target = step.dump_target(name, role_name(role))) {
      // A dump failure loses the file, never the analysis.
      try {
        std::filesystem::create_directories(target->path.parent_path());
        if (target->safetensors) {
          write_safetensors(target->path, {safetensors_source(std::string(name), view)},
                            {{"genscope.analysis", analysis.dump()},
                             {"genscope.run_id", target->run_id},
                             {"genscope.step", target->step_name},
                             {"genscope.role", std::string(role_name(role))}});
        } else {
          write_npy(target->path, view);
        }
        analysis["dump"] = {{"path", target->path.string()},
                            {"format", target->safetensors ? "safetensors" : "npy"}};
      } catch (const std::exception& e) {
        step.record_monitoring_error("tensor_dump", std::string(name) + ": " + e.what());
      }
    }
    step.attach({"tensor", std::string(name), std::move(analysis)});
  } catch (const std::exception& e) {
    step.record_monitoring_error("tensor_analysis", std::string(name) + ": " + e.what());
  } catch (...) {
    step.record_monitoring_error("tensor_analysis", std::string(name) + ": unknown exception");
  }
}

}  // namespace genscope
