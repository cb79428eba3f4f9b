// Markers, labels and human-unit formatting shared by the console report's sections, and the
// renderers of each known attachment type (one file per family of types).
#pragma once

#include <string>

#include "genscope/report.hpp"
#include "genscope/run.hpp"

namespace genscope::detail {

/// Emoji or ASCII markers and the level of detail, chosen once per report.
struct ConsoleStyle {
  bool plain = false;
  bool verbose = false;
  const char* mark(const char* emoji, const char* ascii) const { return plain ? ascii : emoji; }
  /// "→" or "->".
  const char* arrow() const { return plain ? "->" : "→"; }
  std::string status(StepStatus s) const;
  std::string duration(double ns) const { return format_duration(ns, plain); }
};

/// A human label for a metric name ("process.rss_bytes" -> "RAM (process RSS)").
std::string metric_label(const std::string& name);

/// Formats a value in the metric's unit ("1.50 GiB", "42.0%", "61 °C" or "61 C" when plain).
std::string format_value(double value, Unit unit, bool sign = false, bool plain = false);

/// A number in plain decimal notation, never in exponent notation: integers in full, other
/// values with four significant digits ("0.0001234", "12.5"); "n/a" for NaN.
std::string format_number(double value);

/// An integer count with thousands separators ("65,536"); non-integers as format_number.
std::string format_count(double value);

/// A compact count for rates and work counters: "950", "12.3k", "4.56M", "1.20G".
std::string format_short_count(double value);

/// One model's identity, placement and patch state on one line (seed 000 / 002 model state).
std::string model_state_text(const nlohmann::json& model, const ConsoleStyle& style);

/// Renders one attachment: the curated section of its type, the generic tree otherwise;
/// with style.verbose the full data tree follows.
void render_attachment(std::string& out, const Attachment& attachment, const ConsoleStyle& style,
                       const std::string& indent);

// Curated sections, one per known attachment type (data layouts in docs/report.md).
/// "tensor" (tensor_analysis_json layout): seed 000/001 tensor section.
void render_tensor_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                              const std::string& indent);
/// "latent": seed 001's latent output analysis (a tensor analysis plus strategy, input and
/// compression ratios).
void render_latent_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                              const std::string& indent);
/// "tensor_comparison" (comparison_json layout): allclose verdict and error figures.
void render_comparison_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                  const std::string& indent);
/// "text": seed 000's text processing analysis of one prompt.
void render_text_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                            const std::string& indent);
/// "outputs": the files a pipeline wrote.
void render_outputs_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                               const std::string& indent);
/// "model_component": one loaded model file.
void render_component_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                 const std::string& indent);
/// "model_state": seed 000's model state (identity, placement, patches of each model).
void render_model_state_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                   const std::string& indent);
/// "model_snapshot": a ModelSnapshot (model_snapshot.hpp JSON form).
void render_snapshot_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                const std::string& indent);
/// "lora_application": seed 002's summary (both the library's and the reference
/// pipeline's layouts).
void render_lora_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                            const std::string& indent);
/// "usage": seed 003's usage statistics block (the monitor's UsageTracker).
void render_usage_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                             const std::string& indent);
/// "usage_statistics": seed 003's block as a pipeline reports it for one run.
void render_usage_statistics_attachment(std::string& out, const Attachment& a,
                                        const ConsoleStyle& s, const std::string& indent);
/// "performance": seed 004's performance validation.
void render_performance_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                   const std::string& indent);
/// "figure_parts": a step's per-process peaks (genscope run/watch).
void render_figure_parts_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                    const std::string& indent);
/// "process_tree": a watched program's processes and their lifetime peaks.
void render_process_tree_attachment(std::string& out, const Attachment& a, const ConsoleStyle& s,
                                    const std::string& indent);

}  // namespace genscope::detail
