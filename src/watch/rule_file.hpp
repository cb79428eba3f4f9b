// Rule files: a user's own patterns for output genscope has no built-in recogniser for
// (docs/run.md, "Rule files"). A rule is an RE2 regex with named captures and an action:
//
//   {"rules": [
//     {"name": "load", "regex": "^Loading (?P<model>\\S+)", "action": "begin",
//      "kind": "model_loading", "step": "load {model}"},
//     {"regex": "^Loaded in (?P<s>[0-9.]+)s", "action": "end",
//      "counters": {"reported_seconds": "s"}},
//     {"regex": "step (?P<n>\\d+)/(?P<total>\\d+)", "action": "iteration",
//      "position": "n", "total": "total"},
//     {"regex": "^ERROR: (?P<msg>.*)", "action": "fail", "message": "{msg}"}]}
//
// load_rule_file() checks everything before anything runs: a file that cannot be read, is
// not JSON, has an unknown field, action or kind, a regex RE2 rejects, or a template/capture
// naming a group the regex does not have throws genscope::Error("InvalidRules") naming the
// file and the rule.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "genscope/step_kind.hpp"

namespace re2 {
class RE2;
}

namespace genscope::watch {

/// What a rule does when its regex matches.
enum class RuleAction { kBegin, kEnd, kIteration, kCounter, kFail, kLabel, kRunBegin, kRunEnd };

/// A string with {capture} placeholders, checked against the regex's named groups.
struct RuleTemplate {
  std::string text;  ///< empty: not given
  bool given() const noexcept { return !text.empty(); }
};

/// A counter taken from a capture: value = number(capture) * scale.
struct RuleCounter {
  std::string capture;
  double scale = 1;
};

/// One checked, compiled rule.
struct Rule {
  std::string name;   ///< "name" or "rule N"
  std::string regex;
  std::shared_ptr<re2::RE2> re;
  int stream = 0;     ///< 0 any, 1 stdout, 2 stderr
  RuleAction action = RuleAction::kBegin;
  StepKind kind = StepKind::kCustom;
  RuleTemplate step;      ///< begin: the step name; others: which open step
  RuleTemplate message;   ///< fail
  RuleTemplate run;       ///< run_begin: the run name
  std::map<std::string, RuleCounter> counters;
  std::map<std::string, RuleTemplate> labels;
  std::string position;   ///< iteration: capture holding the progress position
  std::string total;      ///< iteration: capture holding the total
  bool ends_at_next_step = false;  ///< begin
};

/// A loaded rule file.
struct RuleFile {
  std::string path;
  std::vector<Rule> rules;
};

/// Reads and checks a rule file. Throws genscope::Error("InvalidRules").
RuleFile load_rule_file(const std::filesystem::path& path);
/// Checks rule-file text (`origin` names it in errors). Throws genscope::Error("InvalidRules").
RuleFile parse_rule_file(std::string_view text, const std::string& origin);

}  // namespace genscope::watch
