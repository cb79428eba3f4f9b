// Recognizer: reads one program's kind of output (ComfyUI, stable-diffusion.cpp, tqdm bars,
// A1111/Forge, a user's rule file) and describes its phases to the StepApplier.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "watch/line_splitter.hpp"
#include "watch/step_applier.hpp"

namespace genscope::watch {

/// One line of output, escape sequences removed.
struct OutputLine {
  std::string_view text;
  int stream = 2;                  ///< 1 stdout, 2 stderr
  std::int64_t steady_ns = 0;      ///< when it was read
  LineEnd end = LineEnd::kNewline;
  bool cut = false;                ///< longer than the bound; `text` is its start
  bool eager = false;              ///< a progress frame delivered before its end (LineSplitter)
};
// An OutputLine with empty text and end kNewline says that the previous eager line of its
// stream ended with '\n'; every recogniser receives it.

/// What a recogniser made of a line.
struct LineResult {
  bool recognized = false;
  /// Text of the line the recogniser did not consume (e.g. a log message printed right after
  /// a progress frame, on the same terminal line): read again by every recogniser.
  std::string_view rest;
};

/// Turns one tool's output lines into phases.
class Recognizer {
 public:
  virtual ~Recognizer() = default;
  /// Stable name ("comfyui", "tqdm", "rules:<file>", ...).
  virtual std::string_view name() const = 0;
  /// Literal substrings of which a line must contain one to be passed to on_line().
  virtual std::vector<std::string> anchors() const = 0;
  /// True while the recogniser needs every line (e.g. while reading a traceback).
  virtual bool wants_every_line() const { return false; }
  /// Reads a line.
  virtual LineResult on_line(const OutputLine& line, StepApplier& applier) = 0;
  /// The program exited (its last lines were read): phases held back for their enclosing
  /// step are recorded now.
  virtual void on_exit(StepApplier& /*applier*/, std::int64_t /*steady_ns*/) {}
};

/// Names of the built-in recognisers, in the order they read a line (the first that
/// recognises it claims it: the tool-specific ones before the generic tqdm one).
std::vector<std::string> builtin_recognizer_names();
/// The built-in recognisers named in `names` (each a builtin_recognizer_names() entry), in
/// that reading order.
std::vector<std::unique_ptr<Recognizer>> make_builtin_recognizers(const std::vector<std::string>& names);

}  // namespace genscope::watch
