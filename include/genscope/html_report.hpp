// The HTML report: one self-contained page (charts by the inlined uPlot library, no network
// at view time, works from file://) rendered from Run values, never from the live monitor.
// Sections and their sources: docs/report.md ("HTML report").
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "genscope/run.hpp"

namespace genscope {

/// A section rendered elsewhere (e.g. a merged generation's ranks, merge.hpp) and placed
/// first in the page, with its own entry in the page's navigation.
struct HtmlSection {
  std::string id;     ///< Element id (letters, digits, '-').
  std::string title;  ///< Heading (plain text).
  std::string html;   ///< Inner HTML, already escaped.
};

/// Options of the HTML report.
struct HtmlReportOptions {
  /// Page title; empty: "genscope report: <pipeline name>".
  std::string title;
  /// Spans of x per chart: a series with more points keeps the rows of the minimum and the
  /// maximum of each span (about one span per pixel column), so spikes stay visible.
  std::size_t chart_spans = 1500;
  /// Sections placed before the timeline.
  std::vector<HtmlSection> lead_sections;
  /// Each run's shift on the timeline's time axis, in ns (entry i for run i; missing: 0):
  /// a merged generation's ranks on its merged clock (merge.hpp). Without, every run starts
  /// at 0 (runs compared side by side).
  std::vector<std::int64_t> run_offsets_ns;
};

/// Renders the report of one or more runs: memory timeline (steps as shaded bands, peaks
/// marked; several runs overlaid), step table, iteration times, tensor statistics and checks,
/// LoRA coverage, validation score and diagnostics, run and host metadata, other attachments.
std::string render_html_report(std::span<const Run> runs, const HtmlReportOptions& options = {});
/// Same for one run.
std::string render_html_report(const Run& run, const HtmlReportOptions& options = {});

}  // namespace genscope
