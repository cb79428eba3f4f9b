// The event names of the event-line format: one table for both directions.
#include "event_line/format.hpp"

#include <array>
#include <utility>

namespace genscope::event_line {

namespace {

constexpr std::array<std::pair<EventType, std::string_view>, 9> kNames{{
    {EventType::kBegin, "begin"},
    {EventType::kEnd, "end"},
    {EventType::kIteration, "iteration"},
    {EventType::kCounter, "counter"},
    {EventType::kAttempt, "attempt"},
    {EventType::kLabel, "label"},
    {EventType::kRunBegin, "run_begin"},
    {EventType::kRunEnd, "run_end"},
    {EventType::kStep, "step"},
}};

}  // namespace

std::string_view to_string(EventType type) {
  for (const auto& [t, name] : kNames) {
    if (t == type) return name;
  }
  return "?";
}

std::optional<EventType> parse_event_type(std::string_view name) {
  for (const auto& [t, n] : kNames) {
    if (n == name) return t;
  }
  return std::nullopt;
}

}  // namespace genscope::event_line
