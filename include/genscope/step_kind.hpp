// The catalogue of pipeline step kinds and step outcomes.
#pragma once

#include <optional>
#include <string_view>

namespace genscope {

/// What a step does in a diffusion pipeline.
enum class StepKind {
  kModelLoading,
  kLoraApplication,
  kTextEncoding,
  kLatentGeneration,
  kSampling,
  kVaeDecode,
  kSave,
  kCustom,
};

/// How a step (or an attempt) ended.
enum class StepStatus { kOk, kFailed, kSkipped, kRunning };

/// The stable snake_case name of a step kind ("text_encoding").
std::string_view to_string(StepKind kind) noexcept;
/// The stable name of a status ("ok", "failed", "skipped", "running").
std::string_view to_string(StepStatus status) noexcept;
/// Parses a step kind name; nullopt when unknown.
std::optional<StepKind> parse_step_kind(std::string_view name) noexcept;
/// Parses a status name; nullopt when unknown.
std::optional<StepStatus> parse_step_status(std::string_view name) noexcept;

}  // namespace genscope
