// libFuzzer target: the targets document parser and command-line target specs on arbitrary
// bytes. Any input either parses or throws genscope::Error; a parsed document validates a run.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "genscope/error.hpp"
#include "genscope/targets.hpp"
#include "genscope/validation.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!document.is_discarded()) {
    for (const char* pipeline : {"p", "wan", ""}) {
      try {
        const Targets targets = targets_from_json(document, pipeline);
        Run run;
        run.duration_ns = 3'000'000'000;
        run.steps.push_back(StepRecord{});
        run.steps.back().name = "sampling";
        (void)performance_report(run, targets);
      } catch (const Error&) {
        // Rejected document.
      }
    }
  }
  try {
    Targets targets;
    apply_target_spec(targets, text);
  } catch (const Error&) {
    // Rejected spec.
  }
  return 0;
}
