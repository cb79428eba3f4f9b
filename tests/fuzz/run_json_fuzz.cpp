// libFuzzer target: the run document reader on arbitrary bytes. Any input either parses into a
// Run or throws genscope::Error; a parsed run must serialise, parse back to the same document
// and render as a console report (curated and verbose) and as every export (HTML, Chrome
// trace, CSV) without crashing; the trace must be valid JSON.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "genscope/chrome_trace.hpp"
#include "genscope/csv_export.hpp"
#include "genscope/error.hpp"
#include "genscope/html_report.hpp"
#include "genscope/report.hpp"
#include "genscope/run_json.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return 0;
  try {
    const Run run = run_from_json(document);
    const nlohmann::json again = to_json(run);
    if (to_json(run_from_json(again)) != again) std::abort();  // not a fixed point
    (void)render_console(run, {.plain = true});
    const std::span<const Run> runs(&run, 1);
    (void)render_html_report(runs, {.title = "", .chart_spans = 16});
    if (nlohmann::json::parse(render_chrome_trace(runs, {.counter_spans = 16}), nullptr, false)
            .is_discarded()) {
      std::abort();  // the trace must stay valid JSON whatever the run holds
    }
    (void)render_steps_csv(runs);
    (void)render_series_csv(runs);
    (void)render_console(run, {.verbose = true});  // every attachment's full tree
  } catch (const Error&) {
    // Rejected document.
  }
  return 0;
}
