// A1111Recognizer: AUTOMATIC1111 stable-diffusion-webui and Forge lines (see the .cpp).
#pragma once

#include <string>
#include <vector>

#include "watch/recognizer.hpp"

namespace genscope::watch {

/// Reads A1111/Forge model loading, Forge memory management and LoRA lines, "Total progress".
class A1111Recognizer final : public Recognizer {
 public:
  std::string_view name() const override { return "a1111"; }
  std::vector<std::string> anchors() const override;
  LineResult on_line(const OutputLine& line, StepApplier& applier) override;

 private:
  int lora_step(StepApplier& applier, std::string_view file, std::int64_t ts);
  int load_token_ = 0;
  int memory_token_ = 0;
  int lora_token_ = 0;
  std::string lora_name_;
};

}  // namespace genscope::watch
