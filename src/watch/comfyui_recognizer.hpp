// ComfyUIRecognizer: a ComfyUI server's log as one run per prompt (see the .cpp for every
// line it reads and where ComfyUI prints it).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "watch/recognizer.hpp"

namespace genscope::watch {

/// Reads ComfyUI's log lines (comfyanonymous/ComfyUI).
class ComfyUIRecognizer final : public Recognizer {
 public:
  std::string_view name() const override { return "comfyui"; }
  std::vector<std::string> anchors() const override;
  bool wants_every_line() const override { return lora_token_ != 0 || failure_active_; }
  LineResult on_line(const OutputLine& line, StepApplier& applier) override;

 private:
  void begin_prompt(StepApplier& applier, std::int64_t ts);
  void end_prompt(StepApplier& applier, std::int64_t ts, std::string_view reported);
  void open_load(StepApplier& applier, const std::string& model, std::int64_t ts);
  void end_lora(StepApplier& applier, std::int64_t ts);
  void begin_failure(StepApplier& applier, std::string_view message, std::int64_t ts);
  void end_failure(StepApplier& applier, std::int64_t ts);
  bool loaded(std::string_view text, StepApplier& applier, std::int64_t ts);
  void vae_retry(std::string_view text, StepApplier& applier, std::int64_t ts);
  void note_size(std::string_view text, StepApplier& applier);
  bool checkpoint_line(std::string_view text, StepApplier& applier, std::int64_t ts);
  void end_checkpoint(StepApplier& applier, std::int64_t ts, std::string_view closed_by);
  void infer_gap(StepApplier& applier, StepKind kind, std::string_view name,
                 std::string_view reason, std::int64_t ts);

  int prompts_ = 0;                  // prompts begun (names "prompt N")
  int queued_ = 0;                   // "got prompt" while one was running
  bool in_prompt_ = false;
  bool prompt_failed_ = false;
  int load_token_ = 0;
  std::string load_model_;
  std::deque<std::string> load_queue_;  // "Requested to load" lines not loaded yet
  int ckpt_token_ = 0;               // the checkpoint load ("model weight dtype" ...)
  bool encoder_ready_ = false;       // a text encoder was loaded or moved, not yet used
  std::int64_t prompt_start_ns_ = 0;
  int lora_token_ = 0;
  std::vector<std::string> lora_keys_;
  std::uint64_t lora_key_count_ = 0;
  int vae_token_ = 0;
  std::int64_t tiled_since_ = 0;     // when the tiled VAE retry began
  bool failure_active_ = false;
  int failure_token_ = 0;
  bool failure_size_seen_ = false;
};

}  // namespace genscope::watch
