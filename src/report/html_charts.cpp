// Chart data of the HTML report (see html_parts.hpp): the JSON object html_report.js reads.
//
//   {"runs":   [{"label", "steps": [{"name", "kind", "status", "start", "end", "depth"}]}],
//    "charts": [{"id", "unit", "x_unit", "x_label", "x_range", "height", "bands", "points",
//                "axes":   [{"scale", "label", "from_zero"}],
//                "tables": [{"run", "x": [..], "series": [{"label", "scale", "color",
//                                                          "values": [..]}]}],
//                "peaks":  [{"series", "x", "y", "step", "time", "span"}]}]}
//
// x is seconds from the run start (or the iteration number); a table per run (uPlot.join
// aligns them); "series" in "peaks" is the uPlot series index (1 = the first table's first
// series); a missing sample is null (a gap in the line). A peak's "time" is "exact" (its
// recorded time), "sampled" (the highest sample inside its step) or "span" (no time known: x
// is the middle of the step and "span" its [start, end]).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <unordered_map>

#include "report/console_style.hpp"
#include "report/downsample.hpp"
#include "report/export_util.hpp"
#include "report/html_parts.hpp"
#include "report/memory_section.hpp"

namespace genscope::detail {
namespace {

// Which metrics of its unit a chart draws: the process's (and GPU's) memory is the subject
// of the memory chart; the whole machine's gets a chart of its own, on an axis from 0, so a
// wobble of a fraction of a percent of the machine's memory does not fill a chart.
enum class Scope { kAll, kNotSystem, kSystem };

struct UnitChart {
  Unit unit;
  const char* id;
  const char* title;
  const char* unit_name;  // formatter of html_report.js
  bool from_zero;
  Scope scope;
};

constexpr UnitChart kUnitCharts[] = {
    {Unit::kBytes, "memory", "Memory timeline (process and GPU)", "bytes", true, Scope::kNotSystem},
    {Unit::kBytes, "system-memory", "System memory (the whole machine, axis from 0)", "bytes", true,
     Scope::kSystem},
    {Unit::kPercent, "percent", "Utilisation and RAM use (%)", "percent", true, Scope::kAll},
    {Unit::kWatts, "power", "Power", "watts", true, Scope::kAll},
    {Unit::kCelsius, "temperature", "Temperature", "celsius", false, Scope::kAll},
    {Unit::kHertz, "clocks", "Clocks", "hertz", true, Scope::kAll},
    {Unit::kCount, "counts", "Counts", "count", true, Scope::kAll},
};

// Metrics drawn on a unit's chart: constants (totals) and headroom (free, available) add
// nothing a reader needs next to the used figures.
bool charted(const std::string& metric) {
  return !is_constant_metric(metric) && !is_headroom_metric(metric);
}

bool is_system(const std::string& metric) { return metric.rfind("system.", 0) == 0; }

bool in_scope(const UnitChart& chart, const std::string& metric) {
  return chart.scope == Scope::kAll || (chart.scope == Scope::kSystem) == is_system(metric);
}

void append_seconds(std::string& out, std::int64_t ns) {
  append_number(out, static_cast<double>(ns) / 1e9);
}

void append_array_sep(std::string& out) {
  if (out.back() != '[') out += ',';
}

// Run r's shift on the shared x axis (a merged generation's clock; 0 when none is given).
std::int64_t shift_of(std::span<const std::int64_t> offsets, std::size_t r) {
  return r < offsets.size() ? offsets[r] : 0;
}

std::string runs_json(std::span<const Run> runs, std::span<const std::int64_t> offsets) {
  std::string out = "[";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    const std::int64_t shift = shift_of(offsets, r);
    append_array_sep(out);
    out += "{\"label\":";
    append_json_string(out, (runs.size() > 1 ? run_letter(r) + ": " : std::string()) +
                                run.pipeline.name + " " + run.id.substr(0, 8));
    out += ",\"steps\":[";
    std::unordered_map<int, int> depth;  // step id -> depth; parents come before their children
    for (const StepRecord& s : run.steps) {
      const auto parent = depth.find(s.parent_id);
      const int d = parent == depth.end() ? 0 : parent->second + 1;
      depth[s.id] = d;
      append_array_sep(out);
      out += "{\"name\":";
      append_json_string(out, s.name);
      out += ",\"kind\":";
      append_json_string(out, to_string(s.kind));
      out += ",\"status\":";
      append_json_string(out, to_string(s.status));
      out += ",\"start\":";
      append_seconds(out, add_saturated(s.start_offset_ns, shift));
      out += ",\"end\":";
      append_seconds(out, add_saturated(add_saturated(s.start_offset_ns,
                                                      std::max<std::int64_t>(s.duration_ns, 0)),
                                        shift));
      out += ",\"depth\":";
      append_int(out, d);
      out += "}";
    }
    out += "]}";
  }
  return out + "]";
}

// One chart per unit present in the series; returns false when the unit has nothing to draw.
bool unit_chart_json(std::string& out, std::span<const Run> runs, const UnitChart& chart,
                     std::size_t spans, std::span<const std::int64_t> offsets) {
  // Colour by metric, the same in every run (runs differ by dash pattern).
  std::vector<std::string> metrics;
  for (const Run& run : runs) {
    for (std::size_t m = 0; m < run.series.metrics.size(); ++m) {
      const std::string& name = run.series.metrics[m];
      if (m < run.series.units.size() && run.series.units[m] == chart.unit && charted(name) &&
          in_scope(chart, name) &&
          std::find(metrics.begin(), metrics.end(), name) == metrics.end()) {
        metrics.push_back(name);
      }
    }
  }
  if (metrics.empty()) return false;
  const bool memory = chart.unit == Unit::kBytes && chart.scope != Scope::kSystem;

  std::int64_t end_ns = 0;  // the run ending last: the x axis spans 0 .. its end
  for (std::size_t r = 0; r < runs.size(); ++r) {
    end_ns = std::max(end_ns, add_saturated(runs[r].duration_ns, shift_of(offsets, r)));
  }
  out += out.back() == '[' ? "{" : ",{";
  out += "\"x_range\":[0,";
  append_seconds(out, end_ns);
  out += "],";
  out += std::string("\"id\":\"") + chart.id + "\",\"unit\":\"" + chart.unit_name +
         "\",\"x_unit\":\"seconds\",\"x_label\":\"time\",\"height\":" + (memory ? "380" : "240") +
         ",\"points\":false,\"bands\":" + (memory ? "true" : "false") + ",\"axes\":[";
  out += std::string("{\"scale\":\"y\",\"label\":\"") + chart.unit_name +
         "\",\"from_zero\":" + (chart.from_zero ? "true" : "false") + "}";
  out += "],\"tables\":[";

  std::string peaks = "[";
  std::size_t series_index = 0;  // uPlot's index of the previous series (0 is x)
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const TimeSeries& ts = runs[r].series;
    const std::size_t width = ts.metrics.size();
    if (ts.size() == 0 || ts.values.size() != width * ts.size()) continue;
    std::vector<std::size_t> columns;
    for (std::size_t m = 0; m < width; ++m) {
      if (m < ts.units.size() && ts.units[m] == chart.unit && charted(ts.metrics[m]) &&
          in_scope(chart, ts.metrics[m])) {
        columns.push_back(m);
      }
    }
    if (columns.empty()) continue;
    const std::vector<std::size_t> rows = minmax_rows(ts, columns, spans);
    const std::int64_t shift = shift_of(offsets, r);
    append_array_sep(out);
    out += "{\"run\":";
    append_int(out, static_cast<std::int64_t>(r));
    out += ",\"x\":[";
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (i) out += ',';
      append_seconds(out, add_saturated(ts.offset_ns[rows[i]], shift));
    }
    out += "],\"series\":[";
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const std::string& metric = ts.metrics[columns[c]];
      if (c) out += ',';
      out += "{\"label\":";
      append_json_string(out,
                         metric_label(metric) + (runs.size() > 1 ? " · " + run_letter(r) : ""));
      out += ",\"scale\":\"y\",\"color\":";
      append_int(out, std::find(metrics.begin(), metrics.end(), metric) - metrics.begin());
      out += ",\"values\":[";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i) out += ',';
        append_number(out, ts.values[rows[i] * width + columns[c]]);
      }
      out += "]}";
      ++series_index;
      if (chart.unit != Unit::kBytes) continue;
      // Each step's peak (the figure the console and the table name), at its recorded time,
      // else at the time of the highest sample inside the step ("sampled"), else across the
      // step's span ("span": no time is known; drawn as a line, never as a point in time).
      std::set<std::pair<std::int64_t, double>> seen;
      for (const StepRecord& s : runs[r].steps) {
        const MetricFigures* f = s.metric(metric);
        if (f == nullptr || !std::isfinite(f->peak)) continue;
        const PeakTime when = peak_run_time(runs[r], s, *f);
        const std::int64_t end =
            add_saturated(s.start_offset_ns, std::max<std::int64_t>(s.duration_ns, 0));
        const std::int64_t middle = s.start_offset_ns + (end - s.start_offset_ns) / 2;
        const std::pair<std::int64_t, double> at{when.offset_ns >= 0 ? when.offset_ns : middle,
                                                 f->peak};
        if (!seen.insert(at).second) continue;  // nested steps share their parent's peak
        append_array_sep(peaks);
        peaks += "{\"series\":";
        append_int(peaks, static_cast<std::int64_t>(series_index));
        peaks += ",\"x\":";
        append_seconds(peaks, add_saturated(at.first, shift));
        peaks += ",\"y\":";
        append_number(peaks, at.second);
        peaks += ",\"step\":";
        append_json_string(peaks, s.name);
        peaks += ",\"time\":\"";
        peaks += when.offset_ns < 0 ? "span" : when.sampled ? "sampled" : "exact";
        peaks += "\"";
        if (when.offset_ns < 0) {
          peaks += ",\"span\":[";
          append_seconds(peaks, add_saturated(s.start_offset_ns, shift));
          peaks += ",";
          append_seconds(peaks, add_saturated(end, shift));
          peaks += "]";
        }
        peaks += "}";
      }
    }
    out += "]}";
  }
  out += "],\"peaks\":" + peaks + "]}";
  return true;
}

bool iterations_chart_json(std::string& out, std::span<const Run> runs, std::size_t spans) {
  std::string tables;
  std::size_t color = 0;
  std::size_t longest = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (const StepRecord& s : runs[r].steps) {
      const std::size_t n = s.iteration_ns.size();
      if (n == 0) continue;
      longest = std::max(longest, n);
      std::vector<std::int64_t> x(n);
      std::iota(x.begin(), x.end(), std::int64_t{1});
      std::vector<double> ms(n);
      for (std::size_t i = 0; i < n; ++i) ms[i] = static_cast<double>(s.iteration_ns[i]) / 1e6;
      const std::vector<std::size_t> rows = minmax_rows(x, ms.data(), 1, spans);
      tables += tables.empty() ? "{" : ",{";
      tables += "\"run\":";
      append_int(tables, static_cast<std::int64_t>(r));
      tables += ",\"x\":[";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i) tables += ',';
        append_int(tables, x[rows[i]]);
      }
      tables += "],\"series\":[{\"label\":";
      append_json_string(tables, s.name + (runs.size() > 1 ? " · " + run_letter(r) : ""));
      tables += ",\"scale\":\"y\",\"color\":";
      append_int(tables, static_cast<std::int64_t>(color++));
      tables += ",\"values\":[";
      for (std::size_t i = 0; i < rows.size(); ++i) {
        if (i) tables += ',';
        append_number(tables, ms[rows[i]]);
      }
      tables += "]}]}";
    }
  }
  if (tables.empty()) return false;
  out += out.back() == '[' ? "{" : ",{";
  out += std::string("\"id\":\"iterations\",\"unit\":\"ms\",\"x_unit\":\"iteration\",") +
         "\"x_label\":\"iteration\",\"height\":260,\"bands\":false,\"points\":" +
         (longest <= 200 ? "true" : "false") +
         ",\"axes\":[{\"scale\":\"y\",\"label\":\"duration\",\"from_zero\":true}],\"tables\":[" +
         tables + "],\"peaks\":[]}";
  return true;
}

}  // namespace

std::string run_letter(std::size_t index) {
  std::string letters;
  for (std::size_t i = index + 1; i > 0; i = (i - 1) / 26) {
    letters.insert(letters.begin(), static_cast<char>('A' + (i - 1) % 26));
  }
  return letters;
}

HtmlChartData html_chart_data(std::span<const Run> runs, std::size_t spans,
                              std::span<const std::int64_t> offsets) {
  HtmlChartData data;
  std::string charts = "[";
  std::size_t stored = 0, taken = 0;
  for (const Run& run : runs) {
    stored += run.series.size();
    taken += run.series.samples_taken;
  }
  const std::string sampling_note =
      "Samples: " + std::to_string(stored) + " stored of " + std::to_string(taken) +
      " taken; series longer than " + std::to_string(2 * spans) +
      " points show the minimum and maximum of each of " + std::to_string(spans) +
      " spans of time, so spikes stay visible. Drag to zoom, double-click to reset, click a "
      "legend entry to hide a series.";
  for (const UnitChart& chart : kUnitCharts) {
    if (!unit_chart_json(charts, runs, chart, spans, offsets)) continue;
    HtmlChart c{chart.id, "timeline", chart.title, sampling_note};
    if (chart.scope == Scope::kSystem) {
      c.note =
          "Memory in use on the whole machine (every process, the page cache excluded), on "
          "an axis from 0 to its highest value. " +
          sampling_note;
    } else if (chart.unit == Unit::kBytes) {
      c.note =
          "Shaded bands and the lane above the plot: top-level steps (red outline: failed "
          "or skipped). Diamonds: each step's peak at the time it happened (exact peaks "
          "come from kernel or allocator high-water marks and can lie above the sampled "
          "line; one without a time of its own is placed at the highest sample inside its "
          "step, or drawn dashed across the step when it has none). " +
          sampling_note;
    }
    data.charts.push_back(std::move(c));
  }
  if (iterations_chart_json(charts, runs, spans)) {
    data.charts.push_back(HtmlChart{"iterations", "iterations", "Iteration times",
                                    "Duration of each iteration of every step that marked "
                                    "iterations (the first one often carries warm-up cost)."});
  }
  data.json = "{\"runs\":" + runs_json(runs, offsets) + ",\"charts\":" + charts + "]}";
  return data;
}

}  // namespace genscope::detail
