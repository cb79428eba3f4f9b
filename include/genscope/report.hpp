// The console report: the seeds' per-step summaries rendered from a Run value.
#pragma once

#include <string>

#include "genscope/run.hpp"

namespace genscope {

/// Options of the console report.
struct ConsoleOptions {
  bool plain = false;    ///< ASCII only: markers, arrows and units.
  bool series = false;   ///< Append the sampled time series summary.
  bool verbose = false;  ///< Add every attachment's full data tree and every metric.
};

/// Renders the full report of a run (header, one section per step, errors, summary);
/// docs/report.md shows what each section holds.
std::string render_console(const Run& run, const ConsoleOptions& options = {});

/// Renders one attachment (tensor analysis, LoRA report, ...) as the report shows it.
std::string render_attachment(const Attachment& attachment, const ConsoleOptions& options = {});

/// Renders bytes in IEC binary units (three significant digits) with a sign when asked:
/// "512 B", "1.50 GiB", "+12.0 MiB"; "n/a" for NaN or infinity.
std::string format_bytes(double bytes, bool sign = false);
/// Renders a duration: "850 ns", "12.3 µs", "4.56 ms", "2.45 s", "3 min 2.0 s".
std::string format_duration(double ns, bool plain = false);
/// The timeline's resolution: "every 10.00 ms", or for an adaptive cadence "every 10.00 ms
/// near events, up to 500.00 ms between".
std::string format_cadence(const TimeSeries& series, bool plain = false);

}  // namespace genscope
