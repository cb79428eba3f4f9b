// The parts of the HTML report (html_report.cpp assembles the page): chart data for the
// page's script, and the static sections rendered from attachments.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "genscope/run.hpp"

namespace genscope::detail {

/// One chart of the page: where it goes and what the page says about it.
struct HtmlChart {
  std::string id;       ///< The element id is "chart-" + id.
  std::string section;  ///< "timeline" or "iterations".
  std::string title;
  std::string note;  ///< How to read it (downsampling, markers), shown under the chart.
};

/// The data the page's script draws from (JSON object text) and the charts it describes.
struct HtmlChartData {
  std::string json;
  std::vector<HtmlChart> charts;
};

/// Builds the charts: one per unit of the sampled series (memory first: process and GPU on
/// the left axis, system on the right; steps as bands, peaks marked), and iteration times.
/// Series longer than 2 * `spans` points are min/max downsampled.
/// offsets: each run's shift on the shared time axis (HtmlReportOptions::run_offsets_ns).
HtmlChartData html_chart_data(std::span<const Run> runs, std::size_t spans,
                              std::span<const std::int64_t> offsets = {});

/// The run's letter in reports of several runs: "A", "B", ... "Z", "AA", ...
std::string run_letter(std::size_t index);

/// Tensor statistics and checks of every "tensor"-like attachment (the section's inner HTML;
/// empty when no step has one).
std::string html_tensor_section(std::span<const Run> runs);
/// LoRA coverage of every "lora_application" attachment (empty when none).
std::string html_lora_section(std::span<const Run> runs);
/// Validation score, targets, diagnostics and recommendations of "performance" attachments
/// (empty when none).
std::string html_validation_section(std::span<const Run> runs);
/// Every other attachment as collapsible JSON, so nothing recorded is missing from the page
/// (empty when none).
std::string html_other_attachments(std::span<const Run> runs);

}  // namespace genscope::detail
