// libFuzzer target: arbitrary sequences of begin / end / iteration / timed steps, from the C++
// API and from the event channel, in any order (steps ended before their children, timed steps
// that start before the run or end after it, parents that hold nothing, runs finished with
// steps open). Whatever comes, every finished run's step tree keeps its invariants
// (genscope::check_step_tree: children within parents, steps within the run, nothing left
// running, closed_by set, the time summary adding up) and normalising it again changes
// nothing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "quiet_monitor.hpp"
#include "genscope/monitor.hpp"
#include "genscope/run_json.hpp"
#include "genscope/step.hpp"
#include "genscope/step_tree.hpp"
#include "genscope/watch.hpp"

namespace {

void check(const genscope::Run& run) {
  if (!genscope::check_step_tree(run).empty()) std::abort();
  genscope::Run again = run;
  genscope::normalize_step_tree(again);
  // The steps only: attachments may hold NaN figures, which never compare equal.
  if (genscope::to_json(again)["steps"] != genscope::to_json(run)["steps"]) std::abort();  // not idempotent
}

// The C++ API: RAII steps ended in any order, steps timed elsewhere (ActiveRun::add_step).
void api(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  ActiveRun run = fuzz::quiet_monitor().start_run({});
  std::vector<Step> open;
  const std::int64_t t0 = Step::now_ns();
  for (std::size_t i = 0; i + 1 < size; i += 2) {
    const std::uint8_t op = data[i];
    const std::uint8_t arg = data[i + 1];
    switch (op % 8) {
      case 0:
        open.push_back(run.step(static_cast<StepKind>(arg % 8), "s" + std::to_string(i)));
        break;
      case 1:
        if (!open.empty()) open.pop_back();  // the innermost ends
        break;
      case 2:
        if (!open.empty()) open[arg % open.size()].end();  // any step ends, children open
        break;
      case 3:
        if (!open.empty()) open[arg % open.size()].end_as("inferred:fuzz");
        break;
      case 4: {
        StepRecord r;
        r.name = "timed" + std::to_string(i);
        r.kind = static_cast<StepKind>(arg % 8);
        r.duration_ns = (static_cast<std::int64_t>(arg) - 64) * 1'000'000;
        r.parent_id = static_cast<int>(arg % 11) - 2;
        r.inferred = (arg & 1) != 0;
        r.closed_by = (arg & 2) != 0 ? "inferred:fuzz" : "";
        run.add_step(std::move(r), t0 + (static_cast<std::int64_t>(arg % 37) - 8) * 1'000'000);
        break;
      }
      case 5:
        if (!open.empty()) open.back().mark_iteration();
        break;
      case 6:
        if (!open.empty()) open[arg % open.size()].mark_inferred("fuzz");
        break;
      default:
        if (!open.empty()) open[arg % open.size()].end_as(kClosedRunEnd);
        break;
    }
  }
  const Run r = run.finish();  // steps still open end with the run
  check(r);
}

// The event channel: begin/end/iteration/step lines with read times that jump (backwards too).
void events(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  WatchOptions options;
  options.runs = static_cast<RunScope>(size % 3);
  bool bad = false;
  options.on_run_finished = [&](Run&& r) {
    bad = bad || !check_step_tree(r).empty();
  };
  static const char* kKinds[] = {"model_loading", "sampling", "vae_decode", "custom"};
  {
    WatchSession session(fuzz::quiet_monitor(), options);
    std::int64_t ts = Step::now_ns();
    session.start(ts);
    for (std::size_t i = 0; i + 1 < size; i += 2) {
      const std::uint8_t op = data[i];
      const std::uint8_t arg = data[i + 1];
      ts += static_cast<std::int64_t>(arg) * 100'000 - ((op & 0x80) != 0 ? 20'000'000 : 0);
      std::string line;
      switch (op % 7) {
        case 0:
          line = std::string(R"({"event":"begin","name":"e)") + std::to_string(arg % 5) +
                 R"(","kind":")" + kKinds[arg % 4] + "\"}";
          break;
        case 1:
          line = R"({"event":"end"})";
          break;
        case 2:
          line = R"({"event":"end","name":"e)" + std::to_string(arg % 5) + "\"}";
          break;
        case 3:
          line = R"({"event":"iteration"})";
          break;
        case 4:
          line = R"({"event":"step","start_steady_ns":)" +
                 std::to_string(ts - static_cast<std::int64_t>(arg) * 3'000'000) +
                 R"(,"step":{"id":0,"parent_id":-1,"name":"fw","kind":"custom","status":"ok","thread":0,"start_offset_ns":0,"duration_ns":)" +
                 std::to_string(static_cast<std::int64_t>(arg) * 5'000'000) +
                 R"(,"metrics":[],"attempts":[]}})";
          break;
        case 5:
          line = (arg & 1) != 0 ? R"({"event":"run_begin","name":"r"})" : R"({"event":"run_end"})";
          break;
        default:
          session.output(1 + (arg & 1), "text\n", ts);
          continue;
      }
      session.event_line(line, ts);
    }
    session.program_exited((size & 1) != 0 ? 9 : 0, ts + 1);
  }
  if (bad) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) {
    api(data + 1, size - 1);
  } else {
    events(data + 1, size - 1);
  }
  return 0;
}
