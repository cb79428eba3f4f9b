// Stable names of step kinds, statuses and units (they appear in the run document).
#include <array>
#include <utility>

#include "genscope/metric.hpp"
#include "genscope/step_kind.hpp"

namespace genscope {
namespace {

constexpr std::array<std::pair<StepKind, std::string_view>, 8> kKinds{{
    {StepKind::kModelLoading, "model_loading"},
    {StepKind::kLoraApplication, "lora_application"},
    {StepKind::kTextEncoding, "text_encoding"},
    {StepKind::kLatentGeneration, "latent_generation"},
    {StepKind::kSampling, "sampling"},
    {StepKind::kVaeDecode, "vae_decode"},
    {StepKind::kSave, "save"},
    {StepKind::kCustom, "custom"},
}};
constexpr std::array<std::pair<StepStatus, std::string_view>, 4> kStatuses{{
    {StepStatus::kOk, "ok"},
    {StepStatus::kFailed, "failed"},
    {StepStatus::kSkipped, "skipped"},
    {StepStatus::kRunning, "running"},
}};
constexpr std::array<std::pair<Unit, std::string_view>, 6> kUnits{{
    {Unit::kBytes, "bytes"},
    {Unit::kPercent, "percent"},
    {Unit::kWatts, "watts"},
    {Unit::kCelsius, "celsius"},
    {Unit::kHertz, "hertz"},
    {Unit::kCount, "count"},
}};

template <class Table, class Key>
std::string_view name_of(const Table& table, Key key) noexcept {
  for (const auto& [k, name] : table) {
    if (k == key) return name;
  }
  return "unknown";
}

template <class Key, class Table>
std::optional<Key> parse_name(const Table& table, std::string_view name) noexcept {
  for (const auto& [k, n] : table) {
    if (n == name) return k;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(StepKind kind) noexcept { return name_of(kKinds, kind); }
std::string_view to_string(StepStatus status) noexcept { return name_of(kStatuses, status); }
std::string_view to_string(Unit unit) noexcept { return name_of(kUnits, unit); }

std::optional<StepKind> parse_step_kind(std::string_view name) noexcept {
  return parse_name<StepKind>(kKinds, name);
}
std::optional<StepStatus> parse_step_status(std::string_view name) noexcept {
  return parse_name<StepStatus>(kStatuses, name);
}
Unit parse_unit(std::string_view name) noexcept {
  return parse_name<Unit>(kUnits, name).value_or(Unit::kCount);
}

}  // namespace genscope
