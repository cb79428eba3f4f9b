// Tolerant JSON accessors, human units by key suffix and the generic attachment tree.
#include "report/json_fields.hpp"

#include <cmath>
#include <cstdio>
#include <ctime>
#include <string_view>

#include "genscope/report.hpp"
#include "report/console_style.hpp"

namespace genscope::detail {

using nlohmann::json;

const json* field(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

double field_number(const json& j, const char* key) {
  const json* v = field(j, key);
  return v != nullptr && v->is_number() ? v->get<double>() : std::nan("");
}

std::string field_text(const json& j, const char* key) {
  const json* v = field(j, key);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

bool field_bool(const json& j, const char* key, bool fallback) {
  const json* v = field(j, key);
  return v != nullptr && v->is_boolean() ? v->get<bool>() : fallback;
}

std::size_t field_size(const json& j, const char* key) {
  const json* v = field(j, key);
  return v != nullptr && v->is_structured() ? v->size() : 0;
}

namespace {

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string utc_text(double unix_seconds) {
  if (!(unix_seconds >= 0 && unix_seconds < 1e11)) return format_number(unix_seconds);
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  if (gmtime_r(&t, &tm) == nullptr) return format_number(unix_seconds);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Keys whose integers are counts (thousands separators); other integers (ids, seeds, sizes
// given in pixels) stay as written.
bool is_count_key(std::string_view k) {
  for (const char* s : {"count", "numel", "elements", "parameters", "tensors", "keys", "modules",
                        "characters", "words", "tokens", "pixels", "samples"}) {
    if (ends_with(k, s)) return true;
  }
  return false;
}

std::string number_text(std::string_view key, double v, bool is_integer, bool plain) {
  if (ends_with(key, "_ns")) return format_duration(v, plain);
  if (ends_with(key, "_us")) return format_duration(v * 1e3, plain);
  if (ends_with(key, "_ms")) return format_duration(v * 1e6, plain);
  if (ends_with(key, "_seconds") || ends_with(key, "_sec")) {
    return key.find("unix") != std::string_view::npos ? utc_text(v) : format_duration(v * 1e9, plain);
  }
  if (key == "timestamp" && v > 1e8) return utc_text(v);  // time.time() in the seeds
  if (key == "bytes" || ends_with(key, "_bytes")) return format_bytes(v);
  if (ends_with(key, "_kb")) return format_bytes(v * 1024.0);
  if (ends_with(key, "_mb")) return format_bytes(v * 1024.0 * 1024.0);  // seed 002: / 1024**2
  if (ends_with(key, "_gb")) return format_bytes(v * 1024.0 * 1024.0 * 1024.0);
  if (ends_with(key, "_percent")) return format_value(v, Unit::kPercent, false, plain);
  if (ends_with(key, "_per_second")) return format_short_count(v) + "/s";
  if (ends_with(key, "_hertz")) return format_value(v, Unit::kHertz, false, plain);
  if (ends_with(key, "_watts")) return format_value(v, Unit::kWatts, false, plain);
  if (ends_with(key, "_celsius")) return format_value(v, Unit::kCelsius, false, plain);
  if (is_integer) {
    if (is_count_key(key)) return format_count(v);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.0f", v);
    return buf;
  }
  return format_number(v);
}

bool all_scalars(const json& a) {
  for (const json& v : a) {
    if (v.is_structured()) return false;
  }
  return true;
}

}  // namespace

std::string format_field(const std::string& key, const json& v, bool plain) {
  if (v.is_null()) return "n/a";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer() || v.is_number_unsigned()) {
    return number_text(key, v.get<double>(), true, plain);
  }
  if (v.is_number()) return number_text(key, v.get<double>(), false, plain);
  if (v.is_array() && all_scalars(v)) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) {
      s += (i ? ", " : "") + (v[i].is_string() ? v[i].get<std::string>() : format_field(key, v[i], plain));
    }
    return s + "]";
  }
  // Appended piecewise: "literal" + std::string&& trips GCC 12's -Wrestrict.
  std::string summary(v.is_array() ? "[" : "{");
  summary += std::to_string(v.size());
  summary += v.is_array() ? " items]" : " entries}";
  return summary;
}

void render_list(std::string& out, const json& a, const std::string& indent, std::size_t limit,
                 bool plain) {
  if (!a.is_array()) return;
  std::size_t n = 0;
  for (const json& v : a) {
    if (n++ == limit) {
      out += indent + (plain ? "... and " : "… and ") + std::to_string(a.size() - limit) + " more\n";
      return;
    }
    out += indent + (v.is_string() ? v.get<std::string>() : v.dump()) + "\n";
  }
}

namespace {

void render_tree(std::string& out, const json& j, const std::string& indent, bool full, bool plain,
                 int depth);

void render_entry(std::string& out, const std::string& key, const json& v, const std::string& indent,
                  bool full, bool plain, int depth) {
  const std::string head = indent + (key.empty() ? "- " : key + ": ");
  if (v.is_object()) {
    if (v.empty()) {
      out += head + "{}\n";
    } else if (!full && (depth >= 2 || v.size() > 12)) {
      out += head + "{" + std::to_string(v.size()) + " entries}\n";
    } else if (key.empty()) {
      // An array item: "- first: 1" then the other entries under it (as YAML lays it out).
      std::string item;
      render_tree(item, v, indent + "  ", full, plain, depth + 1);
      item.replace(indent.size(), 2, "- ");
      out += item;
    } else {
      out += indent + key + ":\n";
      render_tree(out, v, indent + "  ", full, plain, depth + 1);
    }
  } else if (v.is_array()) {
    const bool inline_ok = all_scalars(v) && (full ? v.size() <= 16 : v.size() <= 8);
    if (v.empty() || inline_ok) {
      out += head + format_field(key, v, plain) + "\n";
    } else if (!full) {
      out += head + "[" + std::to_string(v.size()) + " items]\n";
    } else {
      out += indent + (key.empty() ? "-" : key + ":") + "\n";
      for (const json& item : v) render_entry(out, "", item, indent + "  ", full, plain, depth + 1);
    }
  } else {
    out += head + format_field(key, v, plain) + "\n";
  }
}

void render_tree(std::string& out, const json& j, const std::string& indent, bool full, bool plain,
                 int depth) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      render_entry(out, it.key(), it.value(), indent, full, plain, depth);
    }
  } else if (j.is_array()) {
    for (const json& item : j) render_entry(out, "", item, indent, full, plain, depth);
  } else if (!j.is_null()) {
    out += indent + format_field("", j, plain) + "\n";
  }
}

}  // namespace

void render_json_tree(std::string& out, const json& data, const std::string& indent, bool full,
                      bool plain) {
  render_tree(out, data, indent, full, plain, 0);
}

}  // namespace genscope::detail
