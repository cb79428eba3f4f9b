// Saving a finished run's document with the library's fallback chain, and the messages.
#include "run_document.hpp"

#include <ostream>
#include <sstream>

namespace genscope::cli {

SavedRunDocument save_run_document(const Run& run, const std::filesystem::path& path,
                                   bool json_fallback) {
  SavedRunDocument saved;
  std::ostringstream json;  // printed after the report, so stderr reads in order
  saved.outcome = write_run_file_or_fallback(run, path, json_fallback ? &json : nullptr);
  if (saved.outcome.streamed) saved.streamed = json.str();
  return saved;
}

int print_run_document_outcome(const SavedRunDocument& saved, std::ostream& out,
                               std::ostream& err) {
  const RunFileOutcome& o = saved.outcome;
  if (o.ok()) {
    out << "run document: " << o.path.string() << "\n";
    return 0;
  }
  for (std::size_t i = 0; i < o.failures.size(); ++i) {
    const RunFileFailure& f = o.failures[i];
    if (i == 0) {
      err << "genscope: error [" << f.error_name << "]: the run document could not be written: "
          << f.message << "\n";
    } else {
      err << "genscope:   fallback failed too [" << f.error_name << "]: " << f.message << "\n";
    }
  }
  if (!o.path.empty()) {
    err << "genscope: the run document was saved to " << o.path.string() << " instead\n";
    out << "run document: " << o.path.string() << " (fallback)\n";
  } else if (o.streamed) {
    err << "genscope: no file could be written; the run document follows on stderr as JSON\n"
        << saved.streamed;
  } else {
    err << "genscope: the run document was NOT saved; its figures are only in the report above "
           "(--json-fallback prints it on stderr when no file can be written)\n";
  }
  return 2;
}

}  // namespace genscope::cli
