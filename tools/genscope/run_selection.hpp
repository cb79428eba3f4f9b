// Shared by compare/history/validate: resolving run references (files, history ids,
// label selectors) and parsing k=v labels.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "genscope/history.hpp"
#include "genscope/run.hpp"

namespace genscope::cli {

/// Parses "k=v" pairs; throws genscope::Error("InvalidLabel").
std::map<std::string, std::string> parse_labels(const std::vector<std::string>& pairs);
/// The history path: `db` when not empty, else default_history_path().
std::filesystem::path history_path(const std::string& db);
/// Resolves one reference to runs: an existing file is a run document; "label:k=v[,k=v]"
/// selects every history run with those labels (plus `filter`); anything else is a run id
/// (or unique prefix) in the history. Throws genscope::Error("RunNotFound").
std::vector<Run> resolve_runs(const std::string& reference, const std::string& db,
                              const std::map<std::string, std::string>& filter);

}  // namespace genscope::cli
