// Markers and helpers shared by the console report's sections.
#pragma once

#include <string>

#include "genscope/run.hpp"

namespace genscope::detail {

/// Emoji or ASCII markers, chosen once per report.
struct ConsoleStyle {
  bool plain = false;
  const char* mark(const char* emoji, const char* ascii) const { return plain ? ascii : emoji; }
  std::string status(StepStatus s) const;
};

/// Renders one attachment (tensor analysis, LoRA report, ...) as indented lines.
void render_attachment(std::string& out, const Attachment& attachment, const ConsoleStyle& style,
                       const std::string& indent);

/// Renders a "tensor" attachment (tensor_analysis_json layout).
void render_tensor_attachment(std::string& out, const Attachment& attachment,
                              const ConsoleStyle& style, const std::string& indent);

/// Renders seed 003's usage statistics ("usage" attachments).
void render_usage_attachment(std::string& out, const Attachment& attachment,
                             const ConsoleStyle& style, const std::string& indent);
/// Renders a performance validation ("performance" attachments).
void render_performance_attachment(std::string& out, const Attachment& attachment,
                                   const ConsoleStyle& style, const std::string& indent);

/// Renders a step's per-process peaks ("figure_parts" attachments, genscope run/watch).
void render_figure_parts_attachment(std::string& out, const Attachment& attachment,
                                    const ConsoleStyle& style, const std::string& indent);
/// Renders a watched program's process tree and lifetime peaks ("process_tree" attachments).
void render_process_tree_attachment(std::string& out, const Attachment& attachment,
                                    const ConsoleStyle& style, const std::string& indent);

/// A human label for a metric name ("process.rss_bytes" -> "RAM (process RSS)").
std::string metric_label(const std::string& name);

/// Formats a value in the metric's unit.
std::string format_value(double value, Unit unit, bool sign = false);

}  // namespace genscope::detail
