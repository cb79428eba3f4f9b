// An independent checker of Prometheus text 0.0.4 / OpenMetrics 1.0.0 expositions, written
// from the format rules (prometheus/docs exposition_formats.md, OpenMetrics.md), not from the
// writer: line syntax and escapes, one TYPE and HELP per family before its samples, families
// and label sets never repeated or interleaved, counters/histograms named as each format
// wants, histogram buckets sorted and cumulative with +Inf == _count, no timestamps, valid
// UTF-8, "# EOF" last for OpenMetrics. Used by tests/unit/metrics_test.cpp and metrics_fuzz.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "formats/utf8.hpp"

namespace genscope::fuzz {

/// Empty when `text` is a valid exposition; else the first violation, with its line number.
inline std::string check_exposition(std::string_view text, bool openmetrics) {
  if (genscope::detail::find_invalid_utf8(text)) return "invalid UTF-8";
  if (text.find('\r') != std::string_view::npos) return "carriage return";
  if (text.empty() || text.back() != '\n') return "does not end with a newline";
  auto is_name = [](std::string_view n, bool colon) {
    if (n.empty()) return false;
    for (std::size_t i = 0; i < n.size(); ++i) {
      const char c = n[i];
      const bool a = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
      if (!a && !(i > 0 && c >= '0' && c <= '9')) return false;
    }
    return true;
  };
  auto parse_number = [](std::string_view v, double& out) {
    if (v == "NaN") { out = NAN; return true; }
    if (v == "+Inf") { out = INFINITY; return true; }
    if (v == "-Inf") { out = -INFINITY; return true; }
    if (v.empty()) return false;
    for (char c : v) {
      if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == '-' || c == '+')) return false;
    }
    const std::string s(v);
    char* end = nullptr;
    out = std::strtod(s.c_str(), &end);
    return end == s.c_str() + s.size();
  };
  struct Family {
    std::string type;
    bool help = false, unit = false, samples = false, closed = false;
  };
  std::map<std::string, Family> families;
  std::string current;  // the family whose lines we are in
  std::set<std::string> series;
  // Histogram bookkeeping per (family, labels without le).
  struct Hist {
    std::vector<std::pair<double, double>> buckets;
    double count = -1;
    bool sum = false;
  };
  std::map<std::string, Hist> hists;
  bool eof = false;
  std::size_t line_no = 0;
  std::size_t pos = 0;
  auto enter = [&](const std::string& fam) -> std::string {
    if (fam == current) return {};
    if (families.count(fam) > 0 && families[fam].closed) return "family " + fam + " interleaved";
    if (!current.empty()) families[current].closed = true;
    current = fam;
    return {};
  };
  while (pos < text.size()) {
    const std::size_t nl = text.find('\n', pos);
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    const std::string at = " (line " + std::to_string(line_no) + ")";
    if (eof) return "text after # EOF" + at;
    if (line.empty()) {
      if (openmetrics) return "empty line" + at;
      continue;
    }
    if (line.front() == '#') {
      if (openmetrics && line == "# EOF") {
        eof = true;
        continue;
      }
      std::string_view rest = line;
      std::string kind;
      for (std::string_view k : {"# HELP ", "# TYPE ", "# UNIT "}) {
        if (rest.starts_with(k)) kind = std::string(k.substr(2, 4));
      }
      if (kind.empty()) {
        if (openmetrics) return "comment line" + at;
        continue;
      }
      if (kind == "UNIT" && !openmetrics) return "UNIT in 0.0.4" + at;
      rest.remove_prefix(7);
      const std::size_t sp = rest.find(' ');
      const std::string name(rest.substr(0, sp));
      const std::string_view value = sp == std::string_view::npos ? std::string_view{} : rest.substr(sp + 1);
      if (!is_name(name, true)) return "bad metric name '" + name + "'" + at;
      if (auto e = enter(name); !e.empty()) return e + at;
      Family& f = families[name];
      if (f.samples) return kind + " after samples of " + name + at;
      if (kind == "TYPE") {
        if (!f.type.empty()) return "second TYPE for " + name + at;
        static const std::set<std::string> types = {"counter", "gauge", "histogram", "summary",
                                                    "untyped", "unknown", "info", "stateset",
                                                    "gaugehistogram"};
        if (types.count(std::string(value)) == 0) return "unknown type" + at;
        f.type = value;
        if (f.type == "counter" && !openmetrics && !name.ends_with("_total")) {
          return "0.0.4 counter without _total: " + name + at;
        }
        if (f.type != "counter" && name.ends_with("_total")) return "_total on a " + f.type + at;
      } else if (kind == "HELP") {
        if (f.help) return "second HELP for " + name + at;
        if (value.empty()) return "empty HELP for " + name + at;
        for (std::size_t i = 0; i < value.size(); ++i) {
          if (value[i] == '"' && openmetrics) return "unescaped quote in HELP" + at;
          if (value[i] == '\\') {
            if (i + 1 >= value.size()) return "dangling backslash in HELP" + at;
            const char n = value[++i];
            if (!(n == '\\' || n == 'n' || (openmetrics && n == '"'))) return "bad HELP escape" + at;
          }
        }
        f.help = true;
      } else {
        if (f.unit) return "second UNIT" + at;
        if (!name.ends_with("_" + std::string(value))) return "UNIT not a suffix of " + name + at;
        f.unit = true;
      }
      continue;
    }
    // A sample: name{labels} value
    std::size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    const std::string name(line.substr(0, i));
    if (!is_name(name, true)) return "bad sample name '" + name + "'" + at;
    std::vector<std::pair<std::string, std::string>> labels;
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        std::size_t eq = line.find('=', i);
        if (eq == std::string_view::npos) return "label without '='" + at;
        const std::string lname(line.substr(i, eq - i));
        if (!is_name(lname, false) || lname.starts_with("__")) return "bad label name '" + lname + "'" + at;
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') return "label value not quoted" + at;
        ++i;
        std::string value;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\') {
            if (i + 1 >= line.size()) return "dangling backslash" + at;
            const char n = line[i + 1];
            if (n != '\\' && n != '"' && n != 'n') return "bad label escape" + at;
            value += n == 'n' ? '\n' : n;
            i += 2;
          } else {
            value += line[i++];
          }
        }
        if (i >= line.size()) return "unterminated label value" + at;
        ++i;  // closing quote
        for (const auto& l : labels) {
          if (l.first == lname) return "label " + lname + " twice" + at;
        }
        labels.emplace_back(lname, value);
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) return "unterminated labels" + at;
      ++i;  // '}'
    }
    if (i >= line.size() || line[i] != ' ') return "no space before the value" + at;
    const std::string_view value_text = line.substr(i + 1);
    if (value_text.find(' ') != std::string_view::npos) return "timestamp or trailing text" + at;
    double value = 0;
    if (!parse_number(value_text, value)) return "bad value '" + std::string(value_text) + "'" + at;
    // Which family owns this sample?
    std::string family = name;
    std::string suffix;
    for (std::string_view s : {"_bucket", "_sum", "_count", "_total", "_created"}) {
      if (name.ends_with(s)) {
        const std::string base = name.substr(0, name.size() - s.size());
        auto it = families.find(base);
        if (it != families.end() && (it->second.type == "histogram" ||
                                     (openmetrics && it->second.type == "counter"))) {
          family = base;
          suffix = s;
        }
      }
    }
    auto fit = families.find(family);
    if (fit == families.end() || fit->second.type.empty()) return "sample before TYPE: " + name + at;
    if (!fit->second.help) return "no HELP for " + family + at;
    if (auto e = enter(family); !e.empty()) return e + at;
    fit->second.samples = true;
    const std::string& type = fit->second.type;
    if (type == "counter" && openmetrics && suffix != "_total" && suffix != "_created") {
      return "OpenMetrics counter sample without _total: " + name + at;
    }
    if (type == "counter" && (value < 0 || std::isnan(value))) return "negative or NaN counter" + at;
    if (type == "histogram" && suffix.empty()) return "histogram sample without suffix" + at;
    if (type == "gauge" && (name.ends_with("_total") || name.ends_with("_bucket"))) {
      return "gauge with a reserved suffix: " + name + at;
    }
    std::string key = name + "{";
    std::string hist_key = family + "{";
    double le = NAN;
    bool has_le = false;
    for (const auto& [k, v] : labels) {
      key += k + "=" + v + ",";
      if (k == "le" && suffix == "_bucket") {
        has_le = true;
        if (!parse_number(v, le)) return "bad le '" + v + "'" + at;
        if (openmetrics && std::isfinite(le) && v.find_first_of(".e") == std::string::npos) {
          return "non-canonical le '" + v + "'" + at;
        }
      } else {
        hist_key += k + "=" + v + ",";
      }
    }
    if (!series.insert(key).second) return "duplicate series " + key + at;
    if (type == "histogram") {
      Hist& h = hists[hist_key];
      if (suffix == "_bucket") {
        if (!has_le) return "bucket without le" + at;
        if (!h.buckets.empty() && !(le > h.buckets.back().first)) return "le not increasing" + at;
        if (!h.buckets.empty() && value < h.buckets.back().second) return "bucket not cumulative" + at;
        h.buckets.emplace_back(le, value);
      } else if (suffix == "_count") {
        h.count = value;
      } else if (suffix == "_sum") {
        h.sum = true;
      }
    }
  }
  if (openmetrics && !eof) return "no # EOF";
  for (const auto& [key, h] : hists) {
    if (h.buckets.empty() || !std::isinf(h.buckets.back().first)) return "no +Inf bucket in " + key;
    if (h.count < 0 || h.buckets.back().second != h.count) return "+Inf bucket != _count in " + key;
    if (!h.sum) return "no _sum in " + key;
  }
  for (const auto& [name, f] : families) {
    if (f.type.empty()) return "no TYPE for " + name;
  }
  return {};
}

}  // namespace genscope::fuzz
