// libFuzzer target: the merged-document reader (genscope.merged/1, include/genscope/merge.hpp)
// on arbitrary bytes. Any input either parses into a MergedRun or throws genscope::Error; a
// parsed one must serialise to a fixed point, render its console summary, HTML page and
// merged trace (valid JSON) without crashing, and merge again from its runs (or be refused
// by name).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "genscope/error.hpp"
#include "genscope/merge.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return 0;
  try {
    const MergedRun merged = merged_from_json(document);
    const nlohmann::json again = to_json(merged);
    if (to_json(merged_from_json(again)) != again) std::abort();  // not a fixed point
    (void)render_merged_summary(merged, true);
    (void)render_merged_summary(merged, false);
    if (!merged.runs.empty()) {
      (void)render_merged_html(merged);
      if (nlohmann::json::parse(render_merged_trace(merged), nullptr, false).is_discarded()) std::abort();
    }
    std::vector<Run> runs = merged.runs;
    if (merged.launcher) runs.push_back(*merged.launcher);
    (void)merge_runs(std::move(runs), {.straggler_margin = merged.straggler_margin});
  } catch (const Error&) {
    // Rejected document, or runs that are not one generation.
  }
  return 0;
}
