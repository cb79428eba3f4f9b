// Shared helpers of the watch tests: a quiet monitor, a session that collects its finished
// runs, and transcript replay (tests/fixtures/transcripts/*.jsonl: one record per write of
// the original program, {"t": seconds since start, "fd": 1|2, "data": "..."} or
// {"t": ..., "event": "<event-channel line>"}).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "genscope/genscope.hpp"

namespace genscope::testing {

inline MonitorOptions quiet_monitor_options() {
  MonitorOptions o;
  o.nvml_probe = false;
  o.sample_interval = std::chrono::microseconds(2000);
  return o;
}

/// A record of a transcript.
struct TranscriptRecord {
  double t = 0;
  int fd = 0;  // 1/2 output, 0 event line
  std::string data;
};

inline std::vector<TranscriptRecord> load_transcript(const std::string& name) {
  const std::string path = std::string(GENSCOPE_SOURCE_DIR) + "/tests/fixtures/transcripts/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<TranscriptRecord> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    TranscriptRecord r;
    r.t = j.at("t").get<double>();
    if (j.contains("event")) {
      r.fd = 0;
      r.data = j.at("event").get<std::string>();
    } else {
      r.fd = j.at("fd").get<int>();
      r.data = j.at("data").get<std::string>();
    }
    out.push_back(std::move(r));
  }
  return out;
}

/// A monitor + session collecting finished runs.
struct Harness {
  explicit Harness(WatchOptions options = {}, MonitorOptions monitor_options = quiet_monitor_options())
      : monitor(monitor_options), session(monitor, with_collector(std::move(options), runs)) {}

  static WatchOptions with_collector(WatchOptions o, std::vector<Run>& sink) {
    o.on_run_finished = [&sink](Run&& r) {
      // Every run the watch tests produce keeps the step tree's invariants.
      for (const std::string& v : check_step_tree(r)) ADD_FAILURE() << "step tree: " << v;
      sink.push_back(std::move(r));
    };
    return o;
  }

  /// Feeds a transcript; `time_scale` < 1 replays faster (sleeping scaled gaps) while the
  /// session still gets the original timestamps (runs and steps are timed by them, so their
  /// durations are the original ones); 0 = no sleeping at all.
  void replay(const std::vector<TranscriptRecord>& records, double time_scale = 0, int exit_status = 0) {
    const std::int64_t base = Step::now_ns();
    const auto wall0 = std::chrono::steady_clock::now();
    session.start(base);
    for (const TranscriptRecord& r : records) {
      if (time_scale > 0) {
        std::this_thread::sleep_until(wall0 + std::chrono::nanoseconds(static_cast<std::int64_t>(r.t * time_scale * 1e9)));
      }
      const std::int64_t ts = base + static_cast<std::int64_t>(r.t * 1e9);
      if (r.fd == 0) {
        session.event_line(r.data, ts);
      } else {
        session.output(r.fd, r.data, ts);
      }
      last_ts = ts;
    }
    session.program_exited(exit_status << 8, last_ts + 1000);
  }

  std::vector<Run> runs;
  Monitor monitor;
  WatchSession session;
  std::int64_t last_ts = 0;
};

/// Steps of a run with the given name, in order.
inline std::vector<const StepRecord*> steps_named(const Run& run, std::string_view name) {
  std::vector<const StepRecord*> out;
  for (const StepRecord& s : run.steps) {
    if (s.name == name) out.push_back(&s);
  }
  return out;
}

}  // namespace genscope::testing
