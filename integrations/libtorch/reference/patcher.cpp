// Snapshots of the reference weight maps and patch_model over genscope's ModelPatcher.
#include "patcher.hpp"

#include <span>

#include "genscope/torch.hpp"

namespace genscope::detail {

ModelSnapshot snapshot_weights(const Weights& weights, std::string class_name, bool hash) {
  ModelSnapshot s;
  s.class_name = std::move(class_name);
  for (const auto& [key, t] : weights) s.parameters[key] = parameter_info(t, hash);
  if (!s.parameters.empty()) s.device = s.parameters.begin()->second.device;
  s.load_device = s.device;
  s.offload_device = "cpu";
  return s;
}

std::vector<std::string> patch_model(const ModelPatcher& patcher, Weights& weights) {
  std::vector<std::string> keys;
  for (const auto& [key, entries] : patcher.patches()) {
    at::Tensor& w = weights.at(key);
    at::Tensor host = w.detach().to(at::kCPU, at::kFloat).contiguous().clone();
    patcher.patch_weight(key, std::span<float>(host.data_ptr<float>(), static_cast<std::size_t>(host.numel())));
    w = host.to(w.device(), w.scalar_type());
    keys.push_back(key);
  }
  return keys;
}

nlohmann::json patcher_state(const ModelPatcher& patcher) {
  const ModelSnapshot s = patcher.snapshot();
  return {{"patcher_id", s.id},
          {"class", s.class_name},
          {"device", s.device},
          {"load_device", s.load_device},
          {"offload_device", s.offload_device},
          {"patches_count", s.patches_count},
          {"patches_uuid", s.patches_uuid}};
}

}  // namespace genscope::detail
