// WatchSession: output bytes -> lines -> recognisers, event lines -> events, both -> the
// StepApplier (include/genscope/watch.hpp, docs/run.md).
#include "genscope/watch.hpp"

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "event_line/decode.hpp"
#include "genscope/error.hpp"
#include "watch/anchor_filter.hpp"
#include "watch/ansi.hpp"
#include "watch/event_applier.hpp"
#include "watch/line_splitter.hpp"
#include "watch/recognizer.hpp"
#include "watch/rule_recognizer.hpp"
#include "watch/step_applier.hpp"

namespace genscope {

using namespace genscope::watch;

struct WatchSession::Impl {
  Impl(Monitor& m, WatchOptions o) : options(std::move(o)), applier(m, options, stats), events(applier) {}

  WatchOptions options;
  WatchStats stats;
  // Built-ins first (in builtin_recognizer_names() order; the first that recognises a line
  // claims it), then the rule files (which read every line). Declared before the applier:
  // steps may call back into their recogniser when the applier ends them at destruction.
  std::vector<std::unique_ptr<Recognizer>> builtins;
  std::vector<std::unique_ptr<Recognizer>> rules;
  StepApplier applier;
  EventApplier events;
  AnchorFilter filter;  // bit i: recogniser i of builtins, then rules
  std::array<LineSplitter, 2> splitters;
  std::string scratch;
  bool exited = false;

  Recognizer& recognizer(std::size_t i) {
    return i < builtins.size() ? *builtins[i] : *rules[i - builtins.size()];
  }
  std::size_t count() const { return builtins.size() + rules.size(); }

  void handle_line(std::string_view raw, int stream, std::int64_t ts, LineEnd end, bool cut,
                   bool eager, int depth = 0);
};

void WatchSession::Impl::handle_line(std::string_view raw, int stream, std::int64_t ts,
                                     LineEnd end, bool cut, bool eager, int depth) {
  if (raw.empty()) {
    // The previous eager line of this stream ended with '\n': every recogniser may care.
    OutputLine marker;
    marker.stream = stream;
    marker.steady_ns = ts;
    marker.end = end;
    for (std::size_t i = 0; i < count(); ++i) recognizer(i).on_line(marker, applier);
    return;
  }
  if (depth == 0) ++stats.lines;
  OutputLine line;
  line.text = strip_ansi(raw, scratch);
  line.stream = stream;
  line.steady_ns = ts;
  line.end = end;
  line.cut = cut;
  line.eager = eager;
  std::uint64_t mask = filter.match(line.text);
  for (std::size_t i = 0; i < count(); ++i) {
    if (recognizer(i).wants_every_line()) mask |= std::uint64_t{1} << i;
  }
  if (mask == 0) return;  // the common case: nothing to read here
  bool recognized = false;
  std::string rest;
  bool claimed = false;
  for (std::size_t i = 0; i < count(); ++i) {
    const bool is_rule = i >= builtins.size();
    // A recogniser that asked for every line gets it even when another claimed it.
    if ((mask >> i & 1) == 0 || (claimed && !is_rule && !recognizer(i).wants_every_line())) continue;
    const LineResult r = recognizer(i).on_line(line, applier);
    if (!r.recognized) continue;
    recognized = true;
    if (!is_rule) claimed = true;
    if (!r.rest.empty() && rest.empty()) rest = std::string(r.rest);
  }
  if (recognized && depth == 0) ++stats.recognized_lines;
  if (!rest.empty() && depth < 2) handle_line(rest, stream, ts, end, cut, false, depth + 1);
}

WatchSession::WatchSession(Monitor& monitor, WatchOptions options)
    : impl_(std::make_unique<Impl>(monitor, std::move(options))) {
  Impl& s = *impl_;
  std::vector<std::string> known = builtin_recognizer_names();
  for (const std::string& name : s.options.recognizers) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error("UnknownRecognizer", "no built-in recogniser \"" + name + "\" (known: " + list + ")");
    }
  }
  s.builtins = make_builtin_recognizers(s.options.recognizers);
  for (const auto& path : s.options.rule_files) s.rules.push_back(load_rule_recognizer(path));
  if (s.count() > 64) throw Error("InvalidRules", "more than 64 recognisers and rule files");
  for (std::size_t i = 0; i < s.count(); ++i) {
    for (const std::string& a : s.recognizer(i).anchors()) s.filter.add(a, static_cast<unsigned>(i));
  }
}

WatchSession::~WatchSession() = default;

void WatchSession::start(std::int64_t steady_ns) noexcept {
  try {
    if (!impl_->exited) impl_->applier.program_started(steady_ns);
  } catch (...) {
  }
}

void WatchSession::output(int stream, std::string_view bytes, std::int64_t steady_ns) noexcept {
  Impl& s = *impl_;
  if (s.exited) return;
  s.stats.output_bytes += bytes.size();
  const int which = stream == 1 ? 1 : 2;
  try {
    s.applier.program_started(steady_ns);
    s.splitters[which - 1].feed(bytes, [&](std::string_view line, LineEnd end, bool cut, bool eager) {
      s.handle_line(line, which, steady_ns, end, cut, eager);
    });
  } catch (const std::exception& e) {
    s.applier.monitoring_error("watch", std::string("reading the output failed: ") + e.what());
  } catch (...) {
    s.applier.monitoring_error("watch", "reading the output failed");
  }
  s.stats.cut_lines = s.splitters[0].cut_lines() + s.splitters[1].cut_lines();
}

void WatchSession::event_line(std::string_view line, std::int64_t steady_ns) noexcept {
  Impl& s = *impl_;
  if (s.exited) return;
  ++s.stats.event_lines;
  try {
    s.applier.program_started(steady_ns);
    Event e;
    try {
      e = event_line::parse_event(line);
    } catch (const Error& err) {
      ++s.stats.malformed_event_lines;
      s.applier.monitoring_error("events", std::string("malformed event line: ") + err.what());
      return;
    }
    s.events.apply(e, steady_ns);
  } catch (const std::exception& e) {
    s.applier.monitoring_error("events", std::string("applying an event failed: ") + e.what());
  } catch (...) {
    s.applier.monitoring_error("events", "applying an event failed");
  }
}

void WatchSession::program_exited(int wait_status, std::int64_t steady_ns) noexcept {
  Impl& s = *impl_;
  if (s.exited) return;
  try {
    for (int i = 0; i < 2; ++i) {
      s.splitters[i].flush([&](std::string_view line, LineEnd end, bool cut, bool eager) {
        s.handle_line(line, i + 1, steady_ns, end, cut, eager);
      });
    }
    s.stats.cut_lines = s.splitters[0].cut_lines() + s.splitters[1].cut_lines();
    for (std::size_t i = 0; i < s.count(); ++i) s.recognizer(i).on_exit(s.applier, steady_ns);
    s.applier.program_exited(wait_status, steady_ns);
  } catch (...) {
  }
  s.exited = true;
}

ActiveRun* WatchSession::current_run() noexcept { return impl_->applier.current_run(); }

WatchStats WatchSession::stats() const noexcept { return impl_->stats; }

}  // namespace genscope
