// Shared by the commands that finish a monitored run (demo, and later run): saving the run
// document so that nothing is lost, and telling the user where it went.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

#include "genscope/run_json.hpp"

namespace genscope::cli {

/// Where the run document went; `streamed` holds the JSON when it could only go to stderr.
struct SavedRunDocument {
  RunFileOutcome outcome;
  std::string streamed;
};

/// Writes the run document to `path` or a fallback location (write_run_file_or_fallback);
/// with `json_fallback`, when no file can be written the JSON is kept for stderr.
SavedRunDocument save_run_document(const Run& run, const std::filesystem::path& path,
                                   bool json_fallback);

/// Prints where the document went: "run document: P" on `out`; the named errors, the fallback
/// location or the JSON itself on `err`. Returns 0 when the document is at the requested path,
/// 2 otherwise.
int print_run_document_outcome(const SavedRunDocument& saved, std::ostream& out,
                               std::ostream& err);

}  // namespace genscope::cli
