// libFuzzer target: arbitrary bytes as a rule file. It either loads or throws
// genscope::Error("InvalidRules"); a file that loads is applied to a few lines, including
// the input itself, without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "quiet_monitor.hpp"
#include "genscope/error.hpp"
#include "genscope/monitor.hpp"
#include "watch/recognizer.hpp"
#include "watch/rule_file.hpp"
#include "watch/rule_recognizer.hpp"
#include "watch/step_applier.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string text(reinterpret_cast<const char*>(data), size);
  watch::RuleFile file;
  try {
    file = watch::parse_rule_file(text, "fuzz.json");
  } catch (const Error& e) {
    if (e.name() != "InvalidRules") std::abort();
    return 0;
  }
  try {
    watch::RuleRecognizer rules(std::move(file));
    WatchOptions options;
    WatchStats stats;
    watch::StepApplier applier(fuzz::quiet_monitor(), options, stats);
    std::int64_t ts = 1'000'000'000;
    for (const std::string_view line : {std::string_view("Loading model x"), std::string_view("step 3/10"),
                                        std::string_view("ERROR: boom"), std::string_view(text)}) {
      watch::OutputLine l;
      l.text = line;
      l.steady_ns = ts += 1'000'000;
      rules.on_line(l, applier);
    }
    applier.program_exited(0, ts);
  } catch (const Error& e) {
    if (e.name() != "InvalidRules") std::abort();  // the rules could not be compiled together
  }
  return 0;
}
