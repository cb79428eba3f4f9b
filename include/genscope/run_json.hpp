// The run document: JSON serialisation of a Run ("schema": "genscope.run/1").
// Field by field documentation: docs/run-schema.md.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "genscope/run.hpp"

namespace genscope {

/// Serialises a run, including derived figures (deltas, rates, iteration statistics).
nlohmann::json to_json(const Run& run);
/// Parses a run document. Throws genscope::Error("InvalidRunDocument") naming the field.
Run run_from_json(const nlohmann::json& document);
/// Serialises one step as it appears in the run document's "steps" array.
nlohmann::json to_json(const StepRecord& step);
/// Parses one step of a run document. Throws genscope::Error("InvalidRunDocument").
StepRecord step_from_json(const nlohmann::json& step);
/// Writes the run document atomically (temporary file, fsync, rename).
/// Throws genscope::Error("WriteFailed") with the path and errno text.
void write_run_file(const Run& run, const std::filesystem::path& path);
/// Reads a run document. Throws genscope::Error ("ReadFailed", "InvalidJson",
/// "InvalidRunDocument", "UnsupportedSchema").
Run read_run_file(const std::filesystem::path& path);

/// Writes `content` to `path` atomically: temporary file in the same folder, fsync, rename.
/// Throws genscope::Error("WriteFailed").
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace genscope
