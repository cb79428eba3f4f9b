// Rule-file loading and checking (RE2 syntax; named groups `(?P<name>...)`).
#include "watch/rule_file.hpp"

#include <re2/re2.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "genscope/error.hpp"

namespace genscope::watch {

using nlohmann::json;

namespace {

constexpr std::size_t kMaxRuleFileBytes = 1024 * 1024;
constexpr std::size_t kMaxRules = 1000;

struct Context {
  const std::string& origin;
  std::string rule;  // "rule 'load' (#2)"
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("InvalidRules", origin + (rule.empty() ? "" : ": " + rule) + ": " + what);
  }
};

std::optional<RuleAction> action_from(const std::string& s) {
  if (s == "begin") return RuleAction::kBegin;
  if (s == "end") return RuleAction::kEnd;
  if (s == "iteration") return RuleAction::kIteration;
  if (s == "counter") return RuleAction::kCounter;
  if (s == "fail") return RuleAction::kFail;
  if (s == "label") return RuleAction::kLabel;
  if (s == "run_begin") return RuleAction::kRunBegin;
  if (s == "run_end") return RuleAction::kRunEnd;
  return std::nullopt;
}

std::string string_field(const json& r, const char* key, const Context& c) {
  auto it = r.find(key);
  if (it == r.end()) return {};
  if (!it->is_string()) c.fail(std::string("\"") + key + "\" must be a string");
  return it->get<std::string>();
}

// Checks the {capture} placeholders of a template ("{{" and "}}" are literal braces).
RuleTemplate check_template(const std::string& text, const std::map<std::string, int>& groups,
                            const char* field, const Context& c) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '{') {
      if (i + 1 < text.size() && text[i + 1] == '{') {
        ++i;
        continue;
      }
      const std::size_t close = text.find('}', i);
      if (close == std::string::npos) c.fail(std::string("\"") + field + "\": unclosed '{'");
      const std::string name = text.substr(i + 1, close - i - 1);
      if (groups.count(name) == 0) {
        c.fail(std::string("\"") + field + "\" uses {" + name +
               "}, but the regex has no named group (?P<" + name + ">...)");
      }
      i = close;
    } else if (text[i] == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        ++i;
        continue;
      }
      c.fail(std::string("\"") + field + "\": unmatched '}'");
    }
  }
  return RuleTemplate{text};
}

void check_capture(const std::string& name, const std::map<std::string, int>& groups,
                   const char* field, const Context& c) {
  if (groups.count(name) == 0) {
    c.fail(std::string("\"") + field + "\" names capture \"" + name +
           "\", but the regex has no named group (?P<" + name + ">...)");
  }
}

Rule parse_rule(const json& r, std::size_t index, const std::string& origin) {
  Context c{origin, "rule #" + std::to_string(index + 1)};
  if (!r.is_object()) c.fail("a rule must be a JSON object");
  static const std::set<std::string> known = {"name", "regex", "stream", "action", "kind",
                                              "step", "counters", "labels", "message", "position",
                                              "total", "run", "ends_at_next_step"};
  Rule rule;
  rule.name = string_field(r, "name", c);
  if (!rule.name.empty()) c.rule = "rule '" + rule.name + "' (#" + std::to_string(index + 1) + ")";
  if (rule.name.empty()) rule.name = "rule " + std::to_string(index + 1);
  for (auto it = r.begin(); it != r.end(); ++it) {
    if (known.count(it.key()) == 0) c.fail("unknown field \"" + it.key() + "\"");
  }
  rule.regex = string_field(r, "regex", c);
  if (rule.regex.empty()) c.fail("\"regex\" is missing or empty");
  RE2::Options options;
  options.set_log_errors(false);
  rule.re = std::make_shared<RE2>(rule.regex, options);
  if (!rule.re->ok()) c.fail("invalid regex \"" + rule.regex + "\": " + rule.re->error());
  const std::map<std::string, int>& groups = rule.re->NamedCapturingGroups();

  const std::string stream = string_field(r, "stream", c);
  if (stream.empty() || stream == "any") {
    rule.stream = 0;
  } else if (stream == "stdout") {
    rule.stream = 1;
  } else if (stream == "stderr") {
    rule.stream = 2;
  } else {
    c.fail("\"stream\" must be \"stdout\", \"stderr\" or \"any\", not \"" + stream + "\"");
  }
  const std::string action = string_field(r, "action", c);
  const auto a = action_from(action);
  if (!a) {
    c.fail("\"action\" must be one of begin, end, iteration, counter, fail, label, run_begin, "
           "run_end (got \"" + action + "\")");
  }
  rule.action = *a;
  const std::string kind = string_field(r, "kind", c);
  if (!kind.empty()) {
    const auto k = parse_step_kind(kind);
    if (!k) c.fail("unknown step kind \"" + kind + "\"");
    if (rule.action != RuleAction::kBegin) c.fail("\"kind\" applies to \"begin\" rules only");
    rule.kind = *k;
  }
  rule.step = check_template(string_field(r, "step", c), groups, "step", c);
  if (rule.action == RuleAction::kBegin && !rule.step.given()) c.fail("a \"begin\" rule needs \"step\" (the step name)");
  rule.message = check_template(string_field(r, "message", c), groups, "message", c);
  rule.run = check_template(string_field(r, "run", c), groups, "run", c);
  if (auto it = r.find("counters"); it != r.end()) {
    if (!it->is_object()) c.fail("\"counters\" must be an object");
    for (auto ct = it->begin(); ct != it->end(); ++ct) {
      RuleCounter counter;
      if (ct.value().is_string()) {
        counter.capture = ct.value().get<std::string>();
      } else if (ct.value().is_object()) {
        for (auto f = ct.value().begin(); f != ct.value().end(); ++f) {
          if (f.key() != "capture" && f.key() != "scale") c.fail("counter \"" + ct.key() + "\": unknown field \"" + f.key() + "\"");
        }
        auto cap = ct.value().find("capture");
        if (cap == ct.value().end() || !cap->is_string()) c.fail("counter \"" + ct.key() + "\" needs \"capture\" (a string)");
        counter.capture = cap->get<std::string>();
        if (auto sc = ct.value().find("scale"); sc != ct.value().end()) {
          if (!sc->is_number()) c.fail("counter \"" + ct.key() + "\": \"scale\" must be a number");
          counter.scale = sc->get<double>();
        }
      } else {
        c.fail("counter \"" + ct.key() + "\" must be a capture name or {\"capture\": ..., \"scale\": ...}");
      }
      check_capture(counter.capture, groups, "counters", c);
      rule.counters[ct.key()] = counter;
    }
  }
  if (auto it = r.find("labels"); it != r.end()) {
    if (!it->is_object()) c.fail("\"labels\" must be an object");
    for (auto lt = it->begin(); lt != it->end(); ++lt) {
      if (!lt.value().is_string()) c.fail("label \"" + lt.key() + "\" must be a string template");
      rule.labels[lt.key()] = check_template(lt.value().get<std::string>(), groups, "labels", c);
    }
  }
  rule.position = string_field(r, "position", c);
  rule.total = string_field(r, "total", c);
  if (!rule.position.empty()) check_capture(rule.position, groups, "position", c);
  if (!rule.total.empty()) check_capture(rule.total, groups, "total", c);
  if ((!rule.position.empty() || !rule.total.empty()) && rule.action != RuleAction::kIteration) {
    c.fail("\"position\" and \"total\" apply to \"iteration\" rules only");
  }
  if (!rule.total.empty() && rule.position.empty()) c.fail("\"total\" needs \"position\"");
  if (auto it = r.find("ends_at_next_step"); it != r.end()) {
    if (!it->is_boolean()) c.fail("\"ends_at_next_step\" must be true or false");
    if (rule.action != RuleAction::kBegin) c.fail("\"ends_at_next_step\" applies to \"begin\" rules only");
    rule.ends_at_next_step = it->get<bool>();
  }
  return rule;
}

}  // namespace

RuleFile parse_rule_file(std::string_view text, const std::string& origin) {
  const Context c{origin, {}};
  if (text.size() > kMaxRuleFileBytes) c.fail("larger than 1 MiB");
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) c.fail("not valid JSON");
  if (!doc.is_object()) c.fail("a rule file is a JSON object {\"rules\": [...]}");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "rules") c.fail("unknown field \"" + it.key() + "\" (a rule file has \"rules\")");
  }
  auto rules = doc.find("rules");
  if (rules == doc.end() || !rules->is_array()) c.fail("\"rules\" must be an array of rules");
  if (rules->size() > kMaxRules) c.fail("more than 1000 rules");
  RuleFile file;
  file.path = origin;
  for (std::size_t i = 0; i < rules->size(); ++i) file.rules.push_back(parse_rule((*rules)[i], i, origin));
  return file;
}

RuleFile load_rule_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("InvalidRules", path.string() + ": is a folder, not a rule file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("InvalidRules", path.string() + ": cannot be read");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxRuleFileBytes) throw Error("InvalidRules", path.string() + ": larger than 1 MiB");
  }
  if (in.bad()) throw Error("InvalidRules", path.string() + ": cannot be read");
  return parse_rule_file(text, path.string());
}

}  // namespace genscope::watch
