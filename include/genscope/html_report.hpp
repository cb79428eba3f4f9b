// The HTML report: one self-contained page (charts by the inlined uPlot library, no network
// at view time, works from file://) rendered from Run values, never from the live monitor.
// Sections and their sources: docs/report.md ("HTML report").
#pragma once

#include <cstddef>
#include <span>
#include <string>

#include "genscope/run.hpp"

namespace genscope {

/// Options of the HTML report.
struct HtmlReportOptions {
  /// Page title; empty: "genscope report: <pipeline name>".
  std::string title;
  /// Spans of x per chart: a series with more points keeps the rows of the minimum and the
  /// maximum of each span (about one span per pixel column), so spikes stay visible.
  std::size_t chart_spans = 1500;
};

/// Renders the report of one or more runs: memory timeline (steps as shaded bands, peaks
/// marked; several runs overlaid), step table, iteration times, tensor statistics and checks,
/// LoRA coverage, validation score and diagnostics, run and host metadata, other attachments.
std::string render_html_report(std::span<const Run> runs, const HtmlReportOptions& options = {});
/// Same for one run.
std::string render_html_report(const Run& run, const HtmlReportOptions& options = {});

}  // namespace genscope
