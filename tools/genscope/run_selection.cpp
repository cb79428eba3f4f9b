// Resolving run references for the compare/history/validate commands.
#include "run_selection.hpp"

#include "genscope/error.hpp"
#include "genscope/run_json.hpp"

namespace genscope::cli {

std::map<std::string, std::string> parse_labels(const std::vector<std::string>& pairs) {
  std::map<std::string, std::string> labels;
  for (const auto& pair : pairs) {
    const auto eq = pair.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error("InvalidLabel", "label \"" + pair + "\": expected key=value");
    labels[pair.substr(0, eq)] = pair.substr(eq + 1);
  }
  return labels;
}

std::filesystem::path history_path(const std::string& db) {
  return db.empty() ? default_history_path() : std::filesystem::path(db);
}

std::vector<Run> resolve_runs(const std::string& reference, const std::string& db,
                              const std::map<std::string, std::string>& filter) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(reference, ec)) return {read_run_file(reference)};
  HistoryStore store(history_path(db));
  std::vector<Run> runs;
  if (reference.rfind("label:", 0) == 0) {
    std::vector<std::string> pairs;
    std::string rest = reference.substr(6);
    for (std::size_t start = 0; start <= rest.size();) {
      const auto comma = rest.find(',', start);
      pairs.push_back(rest.substr(start, comma == std::string::npos ? std::string::npos
                                                                     : comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    HistoryQuery query;
    query.labels = parse_labels(pairs);
    for (const auto& [k, v] : filter) query.labels[k] = v;
    for (const auto& r : store.list(query)) runs.push_back(run_from_json(*store.document(r.run_id)));
  } else {
    const auto doc = store.document(reference);
    if (doc) runs.push_back(run_from_json(*doc));
  }
  if (runs.empty())
    throw Error("RunNotFound", "\"" + reference + "\" is neither a run file nor a run in " +
                                   store.path().string());
  return runs;
}

}  // namespace genscope::cli
