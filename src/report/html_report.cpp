// The HTML report page (see html_report.hpp): static sections rendered here (steps, iteration
// statistics, run and host metadata), attachment sections (html_attachments.cpp), charts drawn
// in the browser by the inlined uPlot from the JSON of html_charts.cpp. Everything the page
// needs is inside it: no request leaves the page, so it works offline from file://.
#include "genscope/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "genscope/report.hpp"
#include "genscope/version.hpp"
#include "report/assets.hpp"
#include "report/console_style.hpp"
#include "report/export_util.hpp"
#include "report/html_parts.hpp"
#include "report/memory_section.hpp"

namespace genscope {
namespace {

using detail::append_html;
using detail::is_constant_metric;
using detail::is_headroom_metric;

std::string esc(std::string_view text) {
  std::string out;
  append_html(out, text);
  return out;
}

std::string fixed(double v, const char* format) {
  if (!std::isfinite(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string duration(double ns) { return esc(format_duration(ns)); }

std::string status_cell(StepStatus status, const std::string& detail_text) {
  const std::string name(to_string(status));
  std::string cell = "<td class=\"" + name + "\">" + name;
  if (!detail_text.empty()) cell += ": " + esc(detail_text);
  return cell + "</td>";
}

// Metrics given a peak column in the step table: the charted memory figures.
std::vector<std::string> peak_metrics(const Run& run) {
  std::vector<std::string> names;
  for (const StepRecord& s : run.steps) {
    for (const MetricFigures& m : s.metrics) {
      if (m.unit != Unit::kBytes || is_constant_metric(m.name) || is_headroom_metric(m.name)) {
        continue;
      }
      if (std::find(names.begin(), names.end(), m.name) == names.end()) names.push_back(m.name);
    }
  }
  return names;
}

// The peak with when it happened: the recorded time, or for a peak without one (an exact
// high-water mark the sampler never saw) the time of the highest sample inside the step.
std::string peak_cell(const Run& run, const StepRecord& step, const MetricFigures* m) {
  if (m == nullptr || !std::isfinite(m->peak)) return "<td class=\"num\">n/a</td>";
  const std::string title = "before " + format_bytes(m->before) + ", after " +
                            format_bytes(m->after);
  const std::string source = m->peak_source.empty() ? "peak" : m->peak_source;
  std::string when;
  if (m->peak_offset_ns >= 0) {
    when = "at +" + format_duration(static_cast<double>(m->peak_offset_ns)) + ", " + source;
  } else {
    const detail::SampledPeak h = detail::highest_sample(
        run, m->name, step.start_offset_ns,
        detail::add_saturated(step.start_offset_ns, std::max<std::int64_t>(step.duration_ns, 0)));
    const std::string at =
        h.found ? "at +" + format_duration(static_cast<double>(h.offset_ns - step.start_offset_ns))
                : "";
    if (!h.found) {
      when = source + "; no sample inside the step, so no time";
    } else if (h.value >= m->peak) {
      when = source + "; time sampled: " + at;
    } else {
      when =
          source + "; time sampled: highest sample " + format_bytes(h.value) + " " + at;
    }
  }
  return "<td class=\"num\" title=\"" + esc(title) + "\">" +
         esc(format_bytes(m->peak)) + "<br><span class=\"note\">" + esc(when) +
         "</span></td>";
}

std::string attempts_cell(const StepRecord& s) {
  if (s.attempts.empty()) return "<td></td>";
  std::string cell = "<td>";
  for (std::size_t i = 0; i < s.attempts.size(); ++i) {
    const Attempt& a = s.attempts[i];
    const bool ok = a.outcome == StepStatus::kOk;
    std::string title = format_duration(static_cast<double>(a.duration_ns));
    if (!a.error.empty()) title += ": " + a.error;
    cell += std::string(i ? " &rarr; " : "") + "<span class=\"" + (ok ? "ok" : "failed") +
            "\" title=\"" + esc(title) + "\">" + esc(a.strategy) +
            (ok ? " &#10003;" : " &#10007;") + "</span>";
  }
  return cell + "</td>";
}

void steps_table(std::string& out, const Run& run, std::size_t r, std::size_t run_count) {
  const std::vector<std::string> metrics = peak_metrics(run);
  if (run_count > 1) {
    out += "<h3>" + detail::run_letter(r) + ": " + esc(run.pipeline.name) + " " +
           esc(run.id.substr(0, 8)) + "</h3>";
  }
  out += "<div class=\"scroll\"><table class=\"steps\" data-run=\"" + esc(run.id) +
         "\"><thead><tr><th>#</th><th>step</th><th>kind</th><th class=\"num\">start</th>"
         "<th class=\"num\">duration</th><th>share of run</th>";
  for (const std::string& m : metrics) {
    out += "<th class=\"num\">peak " + esc(detail::metric_label(m)) + "</th>";
  }
  out += "<th>status</th><th>attempts</th><th class=\"num\">iterations</th></tr></thead><tbody>";
  // Depth from the parent chain: the document lists parents before their children.
  std::unordered_map<int, int> depth;  // step id -> depth
  for (const StepRecord& s : run.steps) {
    const auto parent = depth.find(s.parent_id);
    const int d = parent == depth.end() ? 0 : parent->second + 1;
    depth.emplace(s.id, d);
    const double share = run.duration_ns > 0 ? 100.0 * static_cast<double>(s.duration_ns) /
                                                   static_cast<double>(run.duration_ns)
                                             : kNaN;
    out += "<tr data-step=\"" + std::to_string(s.id) + "\"><td class=\"num\">" +
           std::to_string(s.id + 1) + "</td><td class=\"depth" + std::to_string(std::min(d, 3)) +
           "\"><span class=\"step-name\">" + esc(s.name) + "</span>" +
           (s.source.empty() ? "" : " <span class=\"note\">" + esc(s.source) + "</span>") +
           (detail::step_inferred(s)
                ? " <span class=\"note inferred\" title=\"" +
                      esc(s.inferred ? "inferred from the evidence around it"
                                     : "end: " + s.closed_by) +
                      "\">~ inferred</span>"
                : "") +
           "</td><td>" + esc(to_string(s.kind)) +
           (s.thread != 0 ? " <span class=\"note\">thread " + std::to_string(s.thread) + "</span>"
                          : "") +
           "</td><td class=\"num\">+" + duration(static_cast<double>(s.start_offset_ns)) +
           "</td><td class=\"num\">" + duration(static_cast<double>(s.duration_ns)) +
           "</td><td class=\"share\"><span style=\"width:" +
           fixed(std::clamp(std::isfinite(share) ? share : 0.0, 0.0, 100.0), "%.1f") +
           "%\"></span><b>" + fixed(share, "%.1f %%") + "</b></td>";
    for (const std::string& m : metrics) out += peak_cell(run, s, s.metric(m));
    std::string why =
        s.error_type.empty() ? s.error_message : s.error_type + ": " + s.error_message;
    out += status_cell(s.status, why) + attempts_cell(s);
    if (s.iteration_ns.empty()) {
      out += "<td></td>";
    } else {
      const IterationStats it = summarize_iterations(s.iteration_ns);
      out += "<td class=\"num\">" + std::to_string(it.count) + " &middot; " +
             fixed(it.iterations_per_second, "%.2f it/s") +
             (s.iterations_inferred ? " <span class=\"note inferred\">~ inferred</span>" : "") +
             "</td>";
    }
    out += "</tr>";
  }
  out += "</tbody></table></div>";
}

void iteration_table(std::string& out, std::span<const Run> runs) {
  // A run column only when there are several runs to tell apart.
  const bool several = runs.size() > 1;
  out += std::string("<table class=\"iterations\"><thead><tr>") + (several ? "<th>run</th>" : "") +
         "<th>step</th><th class=\"num\">count"
         "</th><th class=\"num\">it/s</th><th class=\"num\">first</th><th class=\"num\">first / "
         "rest</th><th class=\"num\">mean</th><th class=\"num\">p50</th><th class=\"num\">p95</th>"
         "<th class=\"num\">min</th><th class=\"num\">max</th><th class=\"num\">stddev</th></tr>"
         "</thead><tbody>";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    for (const StepRecord& s : runs[r].steps) {
      if (s.iteration_ns.empty()) continue;
      const IterationStats it = summarize_iterations(s.iteration_ns);
      out += "<tr>" + (several ? "<td>" + detail::run_letter(r) + "</td>" : std::string()) +
             "<td>" + esc(s.name) + "</td><td class=\"num\">" + std::to_string(it.count) +
             "</td><td class=\"num\">" + fixed(it.iterations_per_second, "%.2f") +
             "</td><td class=\"num\">" + duration(it.first_ns) + "</td><td class=\"num\">" +
             fixed(it.first_ns / it.mean_rest_ns, "%.2fx") + "</td>";
      for (double v : {it.mean_ns, it.p50_ns, it.p95_ns, it.min_ns, it.max_ns, it.stddev_ns}) {
        out += "<td class=\"num\">" + duration(v) + "</td>";
      }
      out += "</tr>";
    }
  }
  out += "</tbody></table>";
}

void meta_row(std::string& out, const char* key, const std::string& value) {
  if (value.empty()) return;
  out += "<dt>" + std::string(key) + "</dt><dd>" + value + "</dd>";
}

std::string pairs(const std::map<std::string, std::string>& map) {
  std::string text;
  for (const auto& [k, v] : map) text += (text.empty() ? "" : ", ") + esc(k) + "=" + esc(v);
  return text;
}

void run_metadata(std::string& out, const Run& run, std::size_t r, std::size_t run_count) {
  if (run_count > 1) out += "<h3>" + detail::run_letter(r) + "</h3>";
  out += "<dl class=\"meta\">";
  meta_row(out, "run", esc(run.id));
  meta_row(out, "started", esc(run.start_utc));
  meta_row(out, "duration", duration(static_cast<double>(run.duration_ns)));
  meta_row(out, "recorded by", "genscope " + esc(run.genscope_version));
  meta_row(out, "pipeline", esc(run.pipeline.name));
  meta_row(
      out, "model",
      esc(run.pipeline.model) +
          (run.pipeline.architecture.empty() ? "" : " (" + esc(run.pipeline.architecture) + ")"));
  meta_row(out, "parameters", pairs(run.pipeline.parameters));
  meta_row(out, "labels", pairs(run.labels));
  if (run.distributed) meta_row(out, "distributed", esc(describe(*run.distributed)));
  meta_row(out, "host",
           esc(run.host.hostname) + ", " + esc(run.host.cpu_model) + ", " +
               std::to_string(run.host.cpu_cores) + " cores, " +
               esc(format_bytes(run.host.ram_bytes)) + " RAM, " + esc(run.host.os));
  std::string gpus;
  for (const GpuInfo& g : run.gpus) {
    gpus += (gpus.empty() ? "" : "<br>") + std::to_string(g.index) + ": " + esc(g.name) + ", " +
            esc(format_bytes(g.total_bytes)) + ", driver " + esc(g.driver_version) +
            ", " + esc(g.uuid);
  }
  meta_row(out, "GPUs", gpus.empty() ? "none seen" : gpus);
  std::string probes;
  for (const std::string& p : run.probes) probes += (probes.empty() ? "" : ", ") + esc(p);
  meta_row(out, "probes", probes);
  meta_row(out, "samples",
           std::to_string(run.series.size()) + " stored of " +
               std::to_string(run.series.samples_taken) + " taken, " +
               esc(format_cadence(run.series)));
  std::string notes;
  for (const std::string& n : run.notes) notes += (notes.empty() ? "" : "<br>") + esc(n);
  meta_row(out, "notes", notes);
  std::string errors;
  for (const MonitoringError& e : run.monitoring_errors) {
    errors += (errors.empty() ? "" : "<br>") + std::string("+") +
              duration(static_cast<double>(e.offset_ns)) + " [" + esc(e.source) + "] " +
              esc(e.message) + (e.step.empty() ? "" : " (in " + esc(e.step) + ")");
  }
  meta_row(out, "monitoring errors", errors);
  out += "</dl>";
}

// "uPlot (v1.6.32)" from the library's banner comment "/*! https://github.com/leeoniya/uPlot
// (v1.6.32) */".
std::string uplot_banner() {
  const std::string_view js = detail::uplot_js();
  const auto open = js.find(" (v"), close = js.find(')', open);
  if (open == std::string_view::npos || close == std::string_view::npos || close > 200)
    return "uPlot";
  return "uPlot " + std::string(js.substr(open + 3, close - open - 3));
}

void section(std::string& out, const std::string& id, const std::string& title,
             const std::string& body) {
  out += std::string("<section id=\"") + esc(id) + "\"><h2>" + title + "</h2>" + body + "</section>\n";
}

void charts_of(std::string& body, const detail::HtmlChartData& charts, const char* where) {
  for (const detail::HtmlChart& c : charts.charts) {
    if (c.section != where) continue;
    body += "<h3>" + esc(c.title) + "</h3><div class=\"chart\" id=\"chart-" + c.id +
            "\"></div><p class=\"note\">" + esc(c.note) + "</p>";
  }
}

}  // namespace

std::string render_html_report(std::span<const Run> runs, const HtmlReportOptions& options) {
  const detail::HtmlChartData charts =
      detail::html_chart_data(runs, std::max<std::size_t>(options.chart_spans, 1),
                              options.run_offsets_ns);
  std::string title = options.title;
  if (title.empty()) {
    title = "genscope report";
    if (!runs.empty() && !runs.front().pipeline.name.empty())
      title += ": " + runs.front().pipeline.name;
    if (runs.size() > 1) title += " (" + std::to_string(runs.size()) + " runs)";
  }

  std::string out;
  out.reserve(200000 + charts.json.size());
  out +=
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta name=\"generator\" content=\"genscope ";
  out += version();
  out += "\"><title>" + esc(title) + "</title>\n<style>";
  out += detail::uplot_css();
  out += "</style>\n<style>";
  out += detail::report_css();
  out += "</style></head>\n<body><header><h1>" + esc(title) + "</h1><p>";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    const Run& run = runs[r];
    out += std::string(r ? "<br>" : "") + (runs.size() > 1 ? detail::run_letter(r) + ": " : "") +
           "run " + esc(run.id) + (run.pipeline.model.empty() ? "" : ", " + esc(run.pipeline.model)) + ", started " +
           esc(run.start_utc) + ", " + duration(static_cast<double>(run.duration_ns)) + ", " +
           std::to_string(run.steps.size()) + " steps";
  }
  out += "</p></header>\n";

  std::string timeline, steps, iterations, metadata;
  charts_of(timeline, charts, "timeline");
  if (timeline.empty()) timeline = "<p class=\"note\">No samples were stored.</p>";
  for (std::size_t r = 0; r < runs.size(); ++r) {
    steps_table(steps, runs[r], r, runs.size());
    run_metadata(metadata, runs[r], r, runs.size());
  }
  charts_of(iterations, charts, "iterations");
  if (!iterations.empty()) iteration_table(iterations, runs);
  const std::string tensors = detail::html_tensor_section(runs);
  const std::string lora = detail::html_lora_section(runs);
  const std::string validation = detail::html_validation_section(runs);
  const std::string others = detail::html_other_attachments(runs);

  out += "<nav>";
  for (const HtmlSection& lead : options.lead_sections) {
    out += "<a href=\"#" + esc(lead.id) + "\">" + esc(lead.title) + "</a>";
  }
  out += "<a href=\"#timeline\">timeline</a><a href=\"#steps\">steps</a>";
  if (!iterations.empty()) out += "<a href=\"#iterations\">iterations</a>";
  if (!tensors.empty()) out += "<a href=\"#tensors\">tensors</a>";
  if (!lora.empty()) out += "<a href=\"#lora\">LoRA</a>";
  if (!validation.empty()) out += "<a href=\"#validation\">validation</a>";
  out += "<a href=\"#run\">run and host</a>";
  if (!others.empty()) out += "<a href=\"#attachments\">other attachments</a>";
  out += "</nav>\n<main>\n";
  for (const HtmlSection& lead : options.lead_sections) section(out, lead.id, esc(lead.title), lead.html);
  section(out, "timeline", "Timeline", timeline);
  section(out, "steps", "Steps", steps);
  if (!iterations.empty()) section(out, "iterations", "Iterations", iterations);
  if (!tensors.empty()) section(out, "tensors", "Tensors", tensors);
  if (!lora.empty()) section(out, "lora", "LoRA coverage", lora);
  if (!validation.empty()) section(out, "validation", "Validation", validation);
  section(out, "run", "Run and host", metadata);
  if (!others.empty()) section(out, "attachments", "Other attachments", others);
  out += "</main>\n<footer>Generated by genscope ";
  out += version();
  out += " from the run document. Charts: " + uplot_banner() +
         " (MIT licence, reproduced in this file's source), inlined: the page loads nothing "
         "from the network.</footer>\n";

  // "</" cannot end the data early: JSON allows "<\/" for "</".
  std::string data = charts.json;
  for (std::size_t at = data.find("</"); at != std::string::npos; at = data.find("</", at + 3)) {
    data.replace(at, 2, "<\\/");
  }
  out +=
      "<script type=\"application/json\" id=\"genscope-data\">" + data + "</script>\n<script>/*\n";
  out += detail::uplot_license();
  out += "*/\n";
  out += detail::uplot_js();
  out += "</script>\n<script>";
  out += detail::report_js();
  out += "</script>\n</body></html>\n";
  return out;
}

std::string render_html_report(const Run& run, const HtmlReportOptions& options) {
  return render_html_report(std::span<const Run>(&run, 1), options);
}

}  // namespace genscope
