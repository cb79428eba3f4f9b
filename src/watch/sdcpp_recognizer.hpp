// SdcppRecognizer: stable-diffusion.cpp's log lines and progress bar (see the .cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "watch/progress_iterations.hpp"
#include "watch/recognizer.hpp"

namespace genscope::watch {

/// A stable-diffusion.cpp log line: "[INFO ] file.cpp:123 - message".
struct SdcppLogLine {
  std::string_view level;    ///< "INFO", "WARN", "ERROR", "DEBUG"
  std::string_view where;    ///< "stable-diffusion.cpp:5711"
  std::string_view message;
};
/// Parses a log line (escape sequences already removed); nullopt when it is not one.
std::optional<SdcppLogLine> parse_sdcpp_log_line(std::string_view line) noexcept;

/// A frame of stable-diffusion.cpp's bar: "  |====>    | 12/20 - 1.23s/it".
struct SdcppBarFrame {
  std::int64_t step = 0;
  std::int64_t steps = 0;
  std::optional<double> seconds_per_step;  ///< from "s/it" or "it/s"; absent for byte rates
};
/// Parses a bar frame; nullopt when it is not one.
std::optional<SdcppBarFrame> parse_sdcpp_bar(std::string_view line) noexcept;

/// Reads stable-diffusion.cpp (leejet/stable-diffusion.cpp).
class SdcppRecognizer final : public Recognizer {
 public:
  std::string_view name() const override { return "sdcpp"; }
  std::vector<std::string> anchors() const override;
  LineResult on_line(const OutputLine& line, StepApplier& applier) override;
  void on_exit(StepApplier& applier, std::int64_t steady_ns) override;

 private:
  /// A finished phase known only when it ended (a lazy tensor load, a LoRA applied to one
  /// model), held until the step that encloses it is recorded.
  struct Held {
    StepRecord record;
    std::int64_t start = 0;
    std::vector<Held> children;
  };

  void on_message(const SdcppLogLine& l, StepApplier& applier, std::int64_t ts);
  void on_bar(const SdcppBarFrame& f, StepApplier& applier, std::int64_t ts);
  void completed(StepApplier& applier, int& token, StepKind kind, std::string_view name,
                 const SdcppLogLine& l, double seconds, std::int64_t ts);
  void end_load(StepApplier& applier, std::int64_t ts);
  void place(Held held, StepApplier& applier);
  void add_tree(Held& held, StepApplier& applier, int parent, std::string_view phase);
  void flush_held(StepApplier& applier);
  void finish_lora(StepApplier& applier, std::int64_t ts, std::string_view closed_by);
  void lora_figures(StepRecord& r);

  int load_token_ = 0;
  int sampling_token_ = 0;
  int decode_token_ = 0;
  std::int64_t last_step_ = 0;    // last bar step of the sampling step
  std::int64_t last_frame_ns_ = 0;
  std::int64_t tensors_ = 0;      // tensors of the last tensor-loading bar
  bool generating_ = false;       // generation began: tensor loads from now on are lazy
  std::int64_t generated_ns_ = 0; // "generate_image completed" (saving starts)
  std::string method_;            // "sampling using X method"
  std::optional<Held> lora_;      // a LoRA being applied ("loading LoRA from" ...)
  std::vector<Held> held_;
  std::vector<std::string> unused_lora_;
  std::uint64_t unused_lora_count_ = 0;
  std::optional<std::pair<double, double>> lora_applied_;  // (applied, total)
};

}  // namespace genscope::watch
