// CSV export of runs for spreadsheets and data frames: steps.csv (one row per step, flat
// columns) and series.csv (long format: one row per sample and metric). RFC 4180: comma
// separated, CRLF line ends, fields with a comma, quote, CR or LF quoted with "" doubled.
// Columns: docs/report.md ("CSV").
#pragma once

#include <filesystem>
#include <span>
#include <string>

#include "genscope/run.hpp"

namespace genscope {

/// steps.csv: run id, step id, parent, name, kind, status, thread, start, duration, share of
/// the run, error, attempts, iterations, then before/peak/after/peak time/peak source of every
/// metric and every counter seen in any step (empty where a step lacks it).
std::string render_steps_csv(std::span<const Run> runs);
/// series.csv: run_id, offset_ns, metric, unit, value; every stored sample, no downsampling;
/// a missing value (null in the run document) is an empty field.
std::string render_series_csv(std::span<const Run> runs);
/// Writes DIR/steps.csv and DIR/series.csv atomically, creating DIR when needed.
/// Throws genscope::Error("WriteFailed").
void write_csv_export(std::span<const Run> runs, const std::filesystem::path& dir);

}  // namespace genscope
