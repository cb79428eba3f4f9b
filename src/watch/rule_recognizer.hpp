// RuleRecognizer: applies one rule file (rule_file.hpp) to every line.
//
// The file's regexes are compiled into one RE2::Set, so a line is scanned once (RE2's DFA,
// linear time, no backtracking: a user's regex cannot stall the watcher) whatever the number
// of rules; the captures of a matching rule are then read with that rule's own RE2. Rules
// act in file order. Per-line budget: a set whose DFA keeps running out of memory (states
// that multiply, e.g. (a|b)*a(a|b){30} next to (a|b){1000}x, on long a/b lines) rebuilds it
// over and over, up to a second per line; a line over 50 ms of CPU (measured for lines of
// 1 KiB or more, and after a line over it on the wall clock), or a DFA that reports running
// out of memory, turns the file's
// rules off for the session, with a monitoring error that starts "RulesDisabled:", so the
// watcher never falls behind the program for good.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "watch/progress_iterations.hpp"
#include "watch/recognizer.hpp"
#include "watch/rule_file.hpp"

namespace genscope::watch {

/// A rule file as a recogniser.
class RuleRecognizer final : public Recognizer {
 public:
  explicit RuleRecognizer(RuleFile file);
  ~RuleRecognizer() override;
  std::string_view name() const override { return name_; }
  std::vector<std::string> anchors() const override { return {}; }
  bool wants_every_line() const override { return true; }
  LineResult on_line(const OutputLine& line, StepApplier& applier) override;

 private:
  struct Compiled;
  void apply(const Rule& rule, const OutputLine& line, StepApplier& applier);
  int target(const Rule& rule, const std::vector<std::string_view>& groups, StepApplier& applier);
  RuleFile file_;
  std::string name_;
  std::unique_ptr<Compiled> compiled_;
  std::vector<int> opened_;  // tokens this file opened, in order
  std::map<int, ProgressIterations> progress_;
  std::vector<int> matched_;
  bool disabled_ = false;  // over the per-line budget, or out of DFA memory (RulesDisabled)
  int suspect_lines_ = 0;  // lines still to be measured on the CPU clock
  void disable(StepApplier& applier, const std::string& why);
  std::vector<std::int64_t> scratch_;
};

/// Loads a rule file as a recogniser. Throws genscope::Error("InvalidRules").
std::unique_ptr<Recognizer> load_rule_recognizer(const std::filesystem::path& path);

}  // namespace genscope::watch
