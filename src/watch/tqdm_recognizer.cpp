// tqdm bars (diffusers, transformers, k-diffusion in ComfyUI and A1111, any script) as steps.
//
// A bar, told apart from other bars by its desc, is one step from its first frame to the
// frame that reaches its total (or a '\n'-ended frame: tqdm.close() ends the bar's line with
// '\n'; tqdm/std.py `close`). Its kind comes from the desc (kind_for_desc below). Bars whose
// unit is "it" give iterations: each advance of n between two frames is n1 - n0 iterations
// over the time between the frames as read (tqdm redraws at most every `mininterval` = 0.1 s,
// tqdm/std.py `__init__`, so several can share one redraw: see ProgressIterations). A bar
// first seen past 0 gets its first iterations from the frame's elapsed field (seconds
// resolution, inferred). Other units (bytes of a download) give a counter "progress".
#include "watch/tqdm_recognizer.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <vector>

#include "watch/progress_iterations.hpp"
#include "watch/text_scan.hpp"
#include "watch/tqdm_frame.hpp"

namespace genscope::watch {

namespace {

bool contains_ci(std::string_view hay, std::string_view needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

}  // namespace

StepKind tqdm_kind_for_desc(std::string_view desc, bool iterations) {
  // Order matters: "Loading pipeline components" is loading, "Sampling" is sampling.
  if (!iterations) return StepKind::kCustom;  // bytes of a download, ...
  if (desc.empty()) return StepKind::kSampling;  // diffusers pipelines, k-diffusion trange
  for (const char* w : {"sampl", "denois", "inference", "diffusion", "steps"}) {
    if (contains_ci(desc, w)) return StepKind::kSampling;
  }
  for (const char* w : {"loading", "load ", "checkpoint shards", "pipeline components"}) {
    if (contains_ci(desc, w)) return StepKind::kModelLoading;
  }
  if (contains_ci(desc, "decod")) return StepKind::kVaeDecode;
  return StepKind::kCustom;
}

struct TqdmRecognizer::Bar {
  int token = 0;
  double total = -1;           // -1: unknown
  bool iterations = false;     // unit "it"
  bool finished = false;       // reached its total / closed
  bool redrawn = false;        // frames ended with '\r' (a live bar, not a log of frames)
  bool stepless = false;       // the run's bound on steps refused it: followed, without a step
  std::int64_t position = 0;
  std::string desc;
  ProgressIterations progress;
};

TqdmRecognizer::TqdmRecognizer(std::vector<std::string> claimed_descs)
    : claimed_(std::move(claimed_descs)) {}
TqdmRecognizer::~TqdmRecognizer() = default;

std::vector<std::string> TqdmRecognizer::anchors() const {
  // "%|" is in every bar with a total; a bar without one ends with its rate "…it/s]" or
  // "…s/it]" (bars without total that also show a postfix or count bytes are not read).
  return {"%|", "it/s]", "s/it]"};
}

void TqdmRecognizer::finish(Bar& bar, StepApplier& applier, std::int64_t ts) {
  if (!bar.iterations) applier.counter(bar.token, "progress", static_cast<double>(bar.position));
  applier.end(Origin::kOutput, bar.token, ts);
  bar.finished = true;
}

LineResult TqdmRecognizer::on_line(const OutputLine& line, StepApplier& applier) {
  if (line.text.empty()) {
    // The last frame drawn on this stream ended with '\n' (tqdm.close()), unless a bar at
    // position > 0 is about to draw itself: tqdm/std.py `moveto` writes '\n' * pos, the frame,
    // then ESC[A * pos. The next line tells them apart (see below).
    Bar* last = line.stream == 1 ? last_bar_[0] : last_bar_[1];
    if (line.end == LineEnd::kNewline && last != nullptr && !last->finished && last->redrawn) {
      pending_close_ = last;
      pending_stream_ = line.stream;
    }
    return {};
  }
  const auto frame = parse_tqdm_frame(line.text);
  if (pending_close_ != nullptr && pending_stream_ == line.stream) {
    // A '\n' after a frame ended its bar, unless the next line is another bar's frame.
    if (!(frame && frame->desc != pending_close_->desc)) finish(*pending_close_, applier, line.steady_ns);
    pending_close_ = nullptr;
  }
  if (!frame) return {};
  for (const std::string& d : claimed_) {
    if (frame->desc == d) return {};  // another recogniser reads this bar
  }
  LineResult result;
  result.recognized = true;
  const std::string_view rest = trim(frame->rest);
  if (!rest.empty()) result.rest = rest;
  // tqdm.close() ends a live bar's last frame with '\n'; a program that logs every frame
  // on its own line ends them all with '\n', so only a bar seen redrawn ends that way.
  const bool newline_end = line.end == LineEnd::kNewline && rest.empty();
  Bar*& last_bar = line.stream == 1 ? last_bar_[0] : last_bar_[1];
  const std::int64_t ts = line.steady_ns;
  const std::string desc(frame->desc);
  const bool iterations = frame->unit == "it" || (frame->unit.size() > 2 && frame->unit.substr(frame->unit.size() - 2) == "it");
  const auto n = static_cast<std::int64_t>(frame->n);
  const double total = frame->total.value_or(-1);

  Bar* bar = nullptr;
  if (auto it = bars_.find(desc); it != bars_.end()) bar = it->second.get();
  // A new bar: none yet, its total changed, it went backwards, or the last one finished and
  // this is not its repeated final frame.
  const bool repeat_of_final = bar != nullptr && bar->finished && n == bar->position &&
                               total == bar->total;
  if (repeat_of_final) return result;
  if (bar != nullptr && !bar->finished && !bar->stepless && !applier.is_open(bar->token) &&
      total == bar->total && n >= bar->position) {
    // Its step was ended by someone else (a failure, the end of a run): the rest of this bar
    // (tqdm's close() redraw, ...) belongs to no step.
    bar->finished = true;
    bar->position = n;
    return result;
  }
  const bool same_bar = bar != nullptr && !bar->finished && total == bar->total &&
                        n >= bar->position && (bar->stepless || applier.is_open(bar->token));
  if (!same_bar) {
    if (bar != nullptr && !bar->finished) applier.end(Origin::kOutput, bar->token, ts, "inferred:next bar");
    if (pending_close_ == bar) pending_close_ = nullptr;
    for (Bar*& last : last_bar_) {
      if (last == bar) last = nullptr;
    }
    auto fresh = std::make_unique<Bar>();
    fresh->total = total;
    fresh->iterations = iterations;
    fresh->desc = desc;
    OpenOptions o;
    o.source = "tqdm";
    const StepKind kind = tqdm_kind_for_desc(frame->desc, iterations);
    std::string name = desc.empty() ? std::string(kind == StepKind::kSampling ? "sampling" : "progress")
                                    : desc;
    fresh->token = applier.open(Origin::kOutput, kind, name, ts, o);
    // Refused within a run (its bound on steps from output): followed without a step, so
    // that its frames do not count as new bars. Without a run, the next frame tries again.
    fresh->stepless = fresh->token == 0 && applier.current_run() != nullptr;
    if (fresh->token != 0 && frame->total) {
      applier.label(fresh->token, "tqdm.total", std::to_string(static_cast<long long>(total)));
    }
    if (iterations && n > 0 && frame->elapsed_seconds) {
      // Iterations before the first frame we saw: spread the bar's own elapsed time.
      std::vector<std::int64_t> d;
      spread_evenly(seconds_to_ns(*frame->elapsed_seconds), n, d);
      applier.iterations(Origin::kOutput, fresh->token, d, true);
    }
    fresh->progress.start(n, ts);
    fresh->position = n;
    bar = fresh.get();
    bars_[desc] = std::move(fresh);
    if (bars_.size() > kMaxBars) forget_finished_bars(bar);
  } else if (n > bar->position) {
    if (bar->iterations) {
      bool inferred = false;
      bar->progress.advance(n, ts, scratch_, inferred);
      applier.iterations(Origin::kOutput, bar->token, scratch_, inferred);
    }
    bar->position = n;
  }
  if (line.end == LineEnd::kReturn || line.eager) bar->redrawn = true;
  last_bar = bar;
  const bool ended_line = newline_end && bar->redrawn;
  if (!bar->iterations && bar->token != 0) {
    applier.label(bar->token, "tqdm.unit", frame->unit);
  }
  const bool complete = bar->total > 0 && static_cast<double>(n) >= bar->total;
  if (complete) {
    finish(*bar, applier, ts);
  } else if (ended_line) {
    pending_close_ = bar;
    pending_stream_ = line.stream;
  }
  return result;
}

void TqdmRecognizer::forget_finished_bars(const Bar* keep) {
  // Bounded memory with many distinct bars: finished ones no frame refers to are dropped (a
  // later frame of the same description is then a new bar, as it would be anyway).
  for (auto it = bars_.begin(); it != bars_.end();) {
    const Bar* b = it->second.get();
    const bool referenced = b == keep || b == pending_close_ || b == last_bar_[0] || b == last_bar_[1];
    if (b->finished && !referenced) {
      it = bars_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace genscope::watch
