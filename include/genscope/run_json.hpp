// The run document: JSON serialisation of a Run ("schema": "genscope.run/1").
// Field by field documentation: docs/run-schema.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
/// Writes the run document atomically (temporary file, fsync, rename). Invalid UTF-8 in
/// strings is written as U+FFFD. Throws genscope::Error("WriteFailed") with the path and errno
/// text.
void write_run_file(const Run& run, const std::filesystem::path& path);

/// One place write_run_file_or_fallback() could not write the document to.
struct RunFileFailure {
  std::filesystem::path path;  ///< The file it tried ("-" for the last-resort stream).
  std::string error_name;      ///< Stable error name, e.g. "WriteFailed".
  std::string message;         ///< What failed, with the errno text ("No space left on device").
};

/// What write_run_file_or_fallback() did with the document.
struct RunFileOutcome {
  std::filesystem::path requested;  ///< The path asked for.
  std::filesystem::path path;       ///< Where the document now is; empty when no file was written.
  bool streamed = false;            ///< Written as JSON to the last-resort stream instead.
  std::vector<RunFileFailure> failures;  ///< Every place that failed, in the order tried.

  /// The document is at the requested path.
  bool ok() const noexcept { return !path.empty() && path == requested; }
  /// The document is somewhere: the requested path, a fallback file or the stream.
  bool saved() const noexcept { return !path.empty() || streamed; }
};

/// Fallback folders, in order: $XDG_STATE_HOME/genscope/runs (default
/// $HOME/.local/state/genscope/runs), then $TMPDIR (default /tmp).
std::vector<std::filesystem::path> run_file_fallback_dirs();
/// Writes the run document to `path`; if that fails (disk full, read-only folder), to the
/// first fallback folder that works (`<id>.json` in the state folder, `genscope-run-<id>.json`
/// in the temporary one); if every file fails and `last_resort` is given, as JSON to that
/// stream. Never throws for a failed write: the outcome says what happened.
RunFileOutcome write_run_file_or_fallback(const Run& run, const std::filesystem::path& path,
                                          std::ostream* last_resort = nullptr);

/// The largest run document read_run_file() reads (256 MiB; parsed, it takes several times that).
inline constexpr std::uintmax_t kMaxRunDocumentBytes = std::uintmax_t{256} << 20;

/// Reads a run document. Throws genscope::Error ("ReadFailed", "InvalidJson",
/// "InvalidRunDocument", "UnsupportedSchema", "RunDocumentTooLarge": over
/// kMaxRunDocumentBytes, twice its size more than the memory this process may still take
/// (ulimit -v, ulimit -d, its memory cgroup, the machine's memory), or running out of memory
/// while parsing it; never an abort).
Run read_run_file(const std::filesystem::path& path);
/// Reads and parses a JSON document with read_run_file()'s limits and errors ("ReadFailed",
/// "InvalidJson", "RunDocumentTooLarge") and hands it to `use` (which may throw its own),
/// e.g. for a merged document (merge.hpp).
void read_json_document(const std::filesystem::path& path,
                        const std::function<void(const nlohmann::json&)>& use);

/// Writes `content` to `path` atomically: temporary file in the same folder, fsync, rename.
/// Throws genscope::Error("WriteFailed").
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace genscope
