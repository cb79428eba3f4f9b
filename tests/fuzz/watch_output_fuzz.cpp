// libFuzzer target: arbitrary bytes as a watched program's output. The first byte picks how
// the rest is cut into writes (any chunk boundary), which stream each write is on and how far
// the read times move (backwards too); every built-in recogniser and a rule file read it.
// Nothing may crash, no iteration may get a negative duration, every run finishes, and every
// finished run's step tree keeps its invariants (genscope::check_step_tree).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>

#include "quiet_monitor.hpp"
#include "genscope/monitor.hpp"
#include "genscope/step_tree.hpp"
#include "genscope/watch.hpp"

namespace {

const char* kRules = R"JSON({"rules": [
  {"regex": "^=== job (?P<id>\\d+) started", "action": "run_begin", "run": "job {id}"},
  {"regex": "^=== job \\d+ done", "action": "run_end"},
  {"regex": "^Loading (?P<f>\\S+)", "action": "begin", "kind": "model_loading", "step": "load {f}"},
  {"regex": "^ready in (?P<s>[0-9.]+)", "action": "end", "counters": {"reported_seconds": "s"}},
  {"regex": "^step (?P<n>\\d+)/(?P<t>\\d+)", "action": "iteration", "position": "n", "total": "t"},
  {"regex": "^ERROR: (?P<m>.*)", "action": "fail", "message": "{m}"}]})JSON";

std::filesystem::path rule_file() {
  static const std::filesystem::path path = [] {
    const auto p = std::filesystem::temp_directory_path() / ("genscope-fuzz-rules-" + std::to_string(::getpid()) + ".json");
    std::ofstream(p) << kRules;
    return p;
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  WatchOptions options;
  options.runs = static_cast<RunScope>(mode % 3);
  options.rule_files = {rule_file()};
  bool failed = false;
  options.on_run_finished = [&](Run&& run) {
    for (const StepRecord& s : run.steps) {
      for (const std::int64_t d : s.iteration_ns) failed = failed || d < 0;
    }
    failed = failed || !check_step_tree(run).empty();
  };
  {
    WatchSession session(fuzz::quiet_monitor(), options);
    std::int64_t ts = 1'000'000'000;
    std::size_t pos = 0;
    unsigned state = mode;
    session.start(ts);
    while (pos < bytes.size()) {
      state = state * 1103515245u + 12345u;
      const std::size_t chunk = 1 + (state >> 16) % 97;
      const int stream = (state >> 8) & 1 ? 2 : 1;
      ts += static_cast<std::int64_t>((state >> 4) % 200'000'000) - ((state & 0xf) == 0 ? 300'000'000 : 0);
      session.output(stream, bytes.substr(pos, chunk), ts);
      pos += chunk;
    }
    session.program_exited(mode & 0x80 ? 9 : 0, ts + 1);
    const WatchStats st = session.stats();
    if (st.output_bytes != bytes.size() || st.recognized_lines > st.lines) std::abort();
  }
  if (failed) std::abort();
  return 0;
}
