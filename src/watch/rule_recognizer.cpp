// Rule files applied to output lines (see rule_recognizer.hpp, docs/run.md "Rule files").
#include "watch/rule_recognizer.hpp"

#include <re2/re2.h>
#include <re2/set.h>

#include <time.h>

#include <algorithm>
#include <chrono>

#include "genscope/error.hpp"
#include "watch/text_scan.hpp"

namespace genscope::watch {

struct RuleRecognizer::Compiled {
  explicit Compiled(const RE2::Options& o) : set(o, RE2::UNANCHORED) {}
  RE2::Set set;
};

namespace {

constexpr std::int64_t kLineBudgetNs = 50'000'000;  // 50 ms for one line of at most 16 KiB

std::int64_t thread_cpu_ns() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<std::int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}

RE2::Options set_options() {
  RE2::Options o;
  o.set_log_errors(false);
  return o;
}

// Expands {capture} placeholders ("{{" / "}}" are braces) with the captured text.
std::string expand(const RuleTemplate& t, const Rule& rule, const std::vector<std::string_view>& groups) {
  std::string out;
  const std::string& s = t.text;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((s[i] == '{' || s[i] == '}') && i + 1 < s.size() && s[i + 1] == s[i]) {
      out += s[i++];
    } else if (s[i] == '{') {
      const std::size_t close = s.find('}', i);
      const auto& named = rule.re->NamedCapturingGroups();
      const auto it = named.find(s.substr(i + 1, close - i - 1));
      if (it != named.end() && static_cast<std::size_t>(it->second) < groups.size()) {
        out += groups[static_cast<std::size_t>(it->second)];
      }
      i = close;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<double> capture_number(const Rule& rule, const std::string& capture,
                                     const std::vector<std::string_view>& groups) {
  const auto& named = rule.re->NamedCapturingGroups();
  const auto it = named.find(capture);
  if (it == named.end() || static_cast<std::size_t>(it->second) >= groups.size()) return std::nullopt;
  return parse_number(trim(groups[static_cast<std::size_t>(it->second)]));
}

}  // namespace

RuleRecognizer::RuleRecognizer(RuleFile file)
    : file_(std::move(file)), name_("rules:" + file_.path),
      compiled_(std::make_unique<Compiled>(set_options())) {
  for (const Rule& r : file_.rules) {
    std::string error;
    if (compiled_->set.Add(r.regex, &error) < 0) {
      throw Error("InvalidRules", file_.path + ": rule '" + r.name + "': invalid regex: " + error);
    }
  }
  if (!file_.rules.empty() && !compiled_->set.Compile()) {
    throw Error("InvalidRules", file_.path + ": the rules are too large to compile together");
  }
}

RuleRecognizer::~RuleRecognizer() = default;

void RuleRecognizer::disable(StepApplier& applier, const std::string& why) {
  disabled_ = true;
  applier.monitoring_error(name_, "RulesDisabled: matching the rules of " + file_.path + " " + why +
                                      " (a rule whose states multiply, such as (a|b)*a(a|b){30}?); "
                                      "they are off from this line on");
}

LineResult RuleRecognizer::on_line(const OutputLine& line, StepApplier& applier) {
  if (file_.rules.empty()) return {};
  matched_.clear();
  const re2::StringPiece text(line.text.data(), line.text.size());
  if (disabled_) return {};
  // The per-line budget: a line (at most 16 KiB) takes microseconds; a set whose DFA keeps
  // running out of its memory (states that multiply) rebuilds it over and over and takes
  // up to a second per line, and the watcher would fall behind the program for good. Lines
  // of 1 KiB or more (where reading the clock costs nothing next to the scan), and the lines
  // after one that was over the budget on the wall clock, are measured on this thread's CPU
  // clock (a thread that was only preempted is not slow); a line over the budget there turns
  // the file off for the rest of the session, as does a DFA that reports running out of memory.
  const bool measure_cpu = suspect_lines_ > 0 || line.text.size() >= 1024;
  const std::int64_t cpu0 = measure_cpu ? thread_cpu_ns() : 0;
  const auto wall0 = std::chrono::steady_clock::now();
  RE2::Set::ErrorInfo info;
  const bool any_match = compiled_->set.Match(text, &matched_, &info);
  const std::int64_t wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now() - wall0).count();
  if (measure_cpu) {
    const std::int64_t cpu_ns = thread_cpu_ns() - cpu0;
    if (suspect_lines_ > 0) --suspect_lines_;
    if (cpu_ns > kLineBudgetNs) {
      disable(applier, "took " + std::to_string(cpu_ns / 1'000'000) + " ms of CPU on one line of " +
                           std::to_string(line.text.size()) + " bytes (the budget is " +
                           std::to_string(kLineBudgetNs / 1'000'000) + " ms)");
      return {};
    }
  } else if (wall_ns > kLineBudgetNs) {
    suspect_lines_ = 16;
  }
  if (!any_match) {
    if (info.kind == RE2::Set::kNoError) return {};
    disable(applier, "ran out of the memory RE2's DFA may use");
    return {};
  }
  std::sort(matched_.begin(), matched_.end());
  bool any = false;
  for (const int i : matched_) {
    const Rule& rule = file_.rules[static_cast<std::size_t>(i)];
    if (rule.stream != 0 && rule.stream != line.stream) continue;
    apply(rule, line, applier);
    any = true;
  }
  return LineResult{any, {}};
}

int RuleRecognizer::target(const Rule& rule, const std::vector<std::string_view>& groups,
                           StepApplier& applier) {
  opened_.erase(std::remove_if(opened_.begin(), opened_.end(),
                               [&](int t) { return !applier.is_open(t); }),
                opened_.end());
  if (rule.step.given()) {
    const std::string name = expand(rule.step, rule, groups);
    return applier.find(Origin::kOutput, name);
  }
  return opened_.empty() ? 0 : opened_.back();
}

void RuleRecognizer::apply(const Rule& rule, const OutputLine& line, StepApplier& applier) {
  // Captures: group 0 is the whole match.
  const int n = rule.re->NumberOfCapturingGroups();
  std::vector<re2::StringPiece> pieces(static_cast<std::size_t>(n) + 1);
  if (!rule.re->Match(re2::StringPiece(line.text.data(), line.text.size()), 0, line.text.size(),
                      RE2::UNANCHORED, pieces.data(), n + 1)) {
    return;
  }
  std::vector<std::string_view> groups;
  groups.reserve(pieces.size());
  for (const auto& p : pieces) groups.emplace_back(p.data() == nullptr ? std::string_view() : std::string_view(p.data(), p.size()));
  const std::int64_t ts = line.steady_ns;
  const std::string source = name_ + ":" + rule.name;

  auto counters_and_labels = [&](int token) {
    for (const auto& [name, counter] : rule.counters) {
      const auto v = capture_number(rule, counter.capture, groups);
      if (!v) {
        applier.monitoring_error(source, "capture \"" + counter.capture + "\" for counter \"" + name + "\" is not a number");
        continue;
      }
      applier.counter(token, name, *v * counter.scale);
    }
    for (const auto& [key, t] : rule.labels) applier.label(token, key, expand(t, rule, groups));
  };
  auto no_step = [&]() {
    applier.monitoring_error(source, "matched, but no step of this rule file is open");
  };

  switch (rule.action) {
    case RuleAction::kBegin: {
      OpenOptions o;
      o.source = source;
      o.ends_at_next_step = rule.ends_at_next_step;
      const int token = applier.open(Origin::kOutput, rule.kind, expand(rule.step, rule, groups), ts, o);
      if (token == 0) return;
      opened_.push_back(token);
      counters_and_labels(token);
      return;
    }
    case RuleAction::kEnd: {
      const int token = target(rule, groups, applier);
      if (token == 0) return no_step();
      counters_and_labels(token);
      progress_.erase(token);
      applier.end(Origin::kOutput, token, ts);
      return;
    }
    case RuleAction::kIteration: {
      const int token = target(rule, groups, applier);
      if (token == 0) return no_step();
      counters_and_labels(token);
      if (rule.position.empty()) {
        scratch_.assign(1, std::max<std::int64_t>(0, ts - applier.last_mark(token)));
        applier.iterations(Origin::kOutput, token, scratch_, false);
        applier.set_last_mark(token, ts);
        return;
      }
      const auto pos = capture_number(rule, rule.position, groups);
      if (!pos || !(*pos >= 0 && *pos <= 9e18)) {
        applier.monitoring_error(source, "capture \"" + rule.position + "\" (position) is not a number");
        return;
      }
      ProgressIterations& p = progress_[token];
      if (!p.started()) p.start(0, applier.opened_at(token));
      bool inferred = false;
      p.advance(static_cast<std::int64_t>(*pos), ts, scratch_, inferred);
      applier.iterations(Origin::kOutput, token, scratch_, inferred);
      if (!rule.total.empty()) {
        const auto total = capture_number(rule, rule.total, groups);
        if (total && *pos >= *total) {
          progress_.erase(token);
          applier.end(Origin::kOutput, token, ts);
        }
      }
      return;
    }
    case RuleAction::kCounter: {
      const int token = target(rule, groups, applier);
      if (token == 0) return no_step();
      counters_and_labels(token);
      return;
    }
    case RuleAction::kFail: {
      int token = target(rule, groups, applier);
      if (token == 0) token = applier.innermost();
      if (token == 0) return no_step();
      counters_and_labels(token);
      applier.fail(token, rule.message.given() ? expand(rule.message, rule, groups) : std::string(line.text));
      return;
    }
    case RuleAction::kLabel: {
      const int token = target(rule, groups, applier);
      if (token == 0) {
        for (const auto& [key, t] : rule.labels) applier.run_label(key, expand(t, rule, groups));
        return;
      }
      counters_and_labels(token);
      return;
    }
    case RuleAction::kRunBegin: {
      RunAnnouncement a;
      a.name = rule.run.given() ? expand(rule.run, rule, groups) : rule.name;
      a.announced_by = "rules";
      for (const auto& [key, t] : rule.labels) a.labels[key] = expand(t, rule, groups);
      applier.run_begin(std::move(a), ts);
      return;
    }
    case RuleAction::kRunEnd:
      applier.run_end(ts);
      return;
  }
}

std::unique_ptr<Recognizer> load_rule_recognizer(const std::filesystem::path& path) {
  return std::make_unique<RuleRecognizer>(load_rule_file(path));
}

}  // namespace genscope::watch
