// The text writer for Prometheus 0.0.4 and OpenMetrics 1.0.0 (see metrics_exposition.hpp).
#include "report/metrics_exposition.hpp"

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <system_error>

#include "formats/utf8.hpp"

namespace genscope::detail {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Appends `text` with every invalid UTF-8 sequence replaced by U+FFFD (a Prometheus parser
// rejects the whole exposition for one invalid label value), and CR too: neither format can
// escape it and OpenMetrics forbids it.
template <class Escape>
void append_utf8(std::string& out, std::string_view text, Escape escape) {
  while (!text.empty()) {
    const std::size_t bad = find_invalid_utf8(text).value_or(text.size());
    for (char c : text.substr(0, bad)) {
      if (c == '\r') {
        out += kReplacement;
      } else {
        escape(out, c);
      }
    }
    if (bad == text.size()) break;
    out += kReplacement;
    text.remove_prefix(bad + 1);
  }
}

void append_labels(std::string& out, const LabelSet& labels, std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  if (labels.empty() && extra_name.empty()) return;
  out += '{';
  bool first = true;
  for (const auto& [name, value] : labels) {
    if (!first) out += ',';
    first = false;
    out += name;
    out += "=\"";
    out += escape_label_value(value);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first) out += ',';
    out += extra_name;
    out += "=\"";
    out += extra_value;  // bounds: digits, '.', 'e', '+', '-', "Inf" only
    out += '"';
  }
  out += '}';
}

void append_sample(std::string& out, const std::string& name, std::string_view suffix,
                   const LabelSet& labels, double value, std::string_view le_name = {},
                   std::string_view le_value = {}) {
  out += name;
  out += suffix;
  append_labels(out, labels, le_name, le_value);
  out += ' ';
  out += format_metric_number(value);
  out += '\n';
}

bool has_points(const MetricFamily& f) {
  for (const MetricPoint& p : f.points) {
    if (f.type == MetricType::kHistogram || !std::isnan(p.value)) return true;
  }
  return false;
}

}  // namespace

std::string format_metric_number(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest round-trip digits as d.ddde±x, then Go's 'g' rule for precision -1
  // (golang/go src/strconv/ftoa.go: %e when exp < -4 || exp >= 6, exponent >= 2 digits).
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));
  const std::size_t e = sci.find('e');
  std::string_view mantissa = sci.substr(0, e);
  const int exp = std::atoi(std::string(sci.substr(e + 1)).c_str());
  std::string out;
  if (!mantissa.empty() && mantissa.front() == '-') {
    out += '-';
    mantissa.remove_prefix(1);
  }
  std::string digits;
  for (char c : mantissa) {
    if (c != '.') digits += c;
  }
  if (exp < -4 || exp >= 6) {
    out += digits[0];
    if (digits.size() > 1) {
      out += '.';
      out.append(digits, 1);
    }
    out += exp < 0 ? "e-" : "e+";
    const int a = std::abs(exp);
    if (a < 10) out += '0';
    out += std::to_string(a);
    return out;
  }
  if (exp < 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-exp - 1), '0');
    out += digits;
    return out;
  }
  const std::size_t int_digits = static_cast<std::size_t>(exp) + 1;
  if (digits.size() <= int_digits) {
    out += digits;
    out.append(int_digits - digits.size(), '0');
  } else {
    out.append(digits, 0, int_digits);
    out += '.';
    out.append(digits, int_digits);
  }
  return out;
}

std::string format_canonical_bound(double value) {
  std::string s = format_metric_number(value);
  if (std::isfinite(value) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  append_utf8(out, value, [](std::string& o, char c) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '"') {
      o += "\\\"";
    } else if (c == '\n') {
      o += "\\n";
    } else {
      o += c;
    }
  });
  return out;
}

std::string escape_help(std::string_view help, MetricsFormat format) {
  const bool quote = format == MetricsFormat::kOpenMetrics;
  std::string out;
  out.reserve(help.size());
  append_utf8(out, help, [quote](std::string& o, char c) {
    if (c == '\\') {
      o += "\\\\";
    } else if (c == '\n') {
      o += "\\n";
    } else if (c == '"' && quote) {
      o += "\\\"";
    } else {
      o += c;
    }
  });
  return out;
}

bool is_valid_metric_name(std::string_view name) noexcept {
  if (name.empty()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

bool is_valid_label_name(std::string_view name) noexcept {
  if (name.empty() || name.starts_with("__")) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

std::string write_exposition(const std::vector<MetricFamily>& families, MetricsFormat format) {
  const bool om = format == MetricsFormat::kOpenMetrics;
  std::string out;
  out.reserve(families.size() * 256);
  for (const MetricFamily& f : families) {
    if (!has_points(f)) continue;
    const char* type = f.type == MetricType::kCounter     ? "counter"
                       : f.type == MetricType::kHistogram ? "histogram"
                                                          : "gauge";
    // 0.0.4 has no counter families: its parser reads "x_total" as its own metric, so HELP
    // and TYPE must name "x_total" (checked with promtool, ecosystem-facts.md §2).
    const std::string meta_name =
        f.type == MetricType::kCounter && !om ? f.name + "_total" : f.name;
    const std::string help = escape_help(f.help, format);
    if (om) {
      out += "# TYPE " + meta_name + " " + type + "\n";
      if (!f.unit.empty()) out += "# UNIT " + meta_name + " " + f.unit + "\n";
      out += "# HELP " + meta_name + " " + help + "\n";
    } else {
      out += "# HELP " + meta_name + " " + help + "\n";
      out += "# TYPE " + meta_name + " " + type + "\n";
    }
    for (const MetricPoint& p : f.points) {
      switch (f.type) {
        case MetricType::kGauge:
          if (!std::isnan(p.value)) append_sample(out, f.name, "", p.labels, p.value);
          break;
        case MetricType::kCounter:
          append_sample(out, f.name, "_total", p.labels, p.value);
          break;
        case MetricType::kHistogram:
          for (std::size_t b = 0; b < f.bounds.size(); ++b) {
            const double v = b < p.cumulative.size() ? static_cast<double>(p.cumulative[b]) : 0;
            append_sample(out, f.name, "_bucket", p.labels, v, "le",
                          om ? format_canonical_bound(f.bounds[b])
                             : format_metric_number(f.bounds[b]));
          }
          append_sample(out, f.name, "_bucket", p.labels, static_cast<double>(p.count), "le",
                        "+Inf");
          append_sample(out, f.name, "_sum", p.labels, p.sum);
          append_sample(out, f.name, "_count", p.labels, static_cast<double>(p.count));
          break;
      }
    }
  }
  if (om) out += "# EOF\n";
  return out;
}

}  // namespace genscope::detail

namespace genscope {

std::string_view metrics_content_type(MetricsFormat format) noexcept {
  return format == MetricsFormat::kOpenMetrics
             ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
             : "text/plain; version=0.0.4; charset=utf-8";
}

MetricsFormat negotiate_metrics_format(std::string_view accept) noexcept {
  // The best-weighted media range we can serve wins; ties go to the earlier entry.
  // Prometheus 2.x sends "application/openmetrics-text;version=1.0.0,
  // application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1".
  double best_q = -1;
  MetricsFormat best = MetricsFormat::kPrometheusText;
  while (!accept.empty()) {
    const std::size_t comma = accept.find(',');
    std::string_view item = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view{} : accept.substr(comma + 1);
    auto trim = [](std::string_view s) {
      while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
      while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
      return s;
    };
    const std::size_t semi = item.find(';');
    const std::string_view type = trim(item.substr(0, semi));
    double q = 1;
    std::string_view version;
    std::string_view params = semi == std::string_view::npos ? std::string_view{} : item.substr(semi + 1);
    while (!params.empty()) {
      const std::size_t s = params.find(';');
      const std::string_view p = trim(params.substr(0, s));
      params = s == std::string_view::npos ? std::string_view{} : params.substr(s + 1);
      if (p.starts_with("q=")) {
        const std::string_view v = p.substr(2);
        double parsed = 0;
        const auto r = std::from_chars(v.data(), v.data() + v.size(), parsed);
        q = r.ec == std::errc() ? parsed : 0;
      } else if (p.starts_with("version=")) {
        version = p.substr(8);
      }
    }
    MetricsFormat format;
    if (type == "application/openmetrics-text" && (version.empty() || version == "1.0.0")) {
      format = MetricsFormat::kOpenMetrics;
    } else if ((type == "text/plain" && (version.empty() || version == "0.0.4")) ||
               type == "text/*" || type == "*/*") {
      format = MetricsFormat::kPrometheusText;
    } else {
      continue;
    }
    if (q > 0 && q > best_q) {
      best_q = q;
      best = format;
    }
  }
  return best;
}

}  // namespace genscope
