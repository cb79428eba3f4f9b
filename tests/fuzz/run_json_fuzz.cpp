// libFuzzer target: the run document reader on arbitrary bytes. Any input either parses into a
// Run or throws genscope::Error; a parsed run must serialise, parse back to the same document
// and render as a report (curated and verbose) without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "genscope/error.hpp"
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
    (void)render_console(run, {.verbose = true});  // every attachment's full tree
  } catch (const Error&) {
    // Rejected document.
  }
  return 0;
}
