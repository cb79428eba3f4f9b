// libFuzzer target: arbitrary bytes as event-channel lines (the format of src/event_line/).
// Each line either parses or throws genscope::Error("InvalidEvent"); a parsed forwarded step
// encodes and parses back to the same record; all lines, good and bad, go through a
// WatchSession without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "event_line/decode.hpp"
#include "event_line/encode.hpp"
#include "quiet_monitor.hpp"
#include "genscope/error.hpp"
#include "genscope/monitor.hpp"
#include "genscope/run_json.hpp"
#include "genscope/watch.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t lines = 0;
  std::size_t malformed = 0;
  {
    WatchSession session(fuzz::quiet_monitor(), {});
    std::int64_t ts = 1'000'000'000;
    std::size_t start = 0;
    while (start <= text.size()) {
      std::size_t nl = text.find('\n', start);
      if (nl == std::string_view::npos) nl = text.size();
      const std::string_view line = text.substr(start, nl - start);
      try {
        const event_line::Event e = event_line::parse_event(line);
        if (e.type == event_line::EventType::kStep) {
          const event_line::Event again =
              event_line::parse_event(event_line::encode_step(e.record, e.ref, e.start_steady_ns.value_or(0)));
          if (to_json(again.record) != to_json(e.record)) std::abort();
        }
      } catch (const Error& err) {
        if (err.name() != "InvalidEvent") std::abort();
        ++malformed;
      }
      session.event_line(line, ts += 1'000'000);
      ++lines;
      start = nl + 1;
    }
    session.program_exited(0, ts);
    if (session.stats().event_lines != lines || session.stats().malformed_event_lines != malformed) std::abort();
  }
  return 0;
}
