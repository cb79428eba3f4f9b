// The runs of one distributed generation joined into one value: every rank's run on one
// clock, each step's spread across the ranks (min, median, max, the slowest rank, stragglers)
// and every rank's peak memory. A report-level operation over finished Run values (nothing
// is shared between the ranks while they run). Rules: docs/distributed.md.
//
//   std::vector<genscope::Run> runs = {read_run_file("rank0.json"), read_run_file("rank1.json")};
//   genscope::MergedRun merged = genscope::merge_runs(std::move(runs));
//   for (const auto& s : merged.steps) if (s.straggler) ...
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "genscope/run.hpp"

namespace genscope {

/// How runs are merged.
struct MergeOptions {
  /// A step's slowest rank is a straggler when its duration exceeds the ranks' median by
  /// more than this fraction of the median (0.10 = 10 %).
  double straggler_margin = 0.10;
};

/// One rank of the merged generation.
struct MergedRank {
  int rank = 0;
  std::string host;
  std::string run_id;
  /// Where the rank's run starts on the merged clock, ns from the earliest start (after
  /// the alignment's correction).
  std::int64_t offset_ns = 0;
  /// The correction added to the rank's UTC start by the barrier alignment (0 with "utc").
  std::int64_t clock_shift_ns = 0;
  std::int64_t duration_ns = 0;
  /// Peak of each memory figure (bytes) over the rank's steps: process.rss_bytes,
  /// gpu<i>.used_bytes, alloc.<device>.allocated_bytes / reserved_bytes, ... as recorded.
  std::map<std::string, double> peak_bytes;
  /// The rank's processes in the launcher's process tree (its own process and every
  /// descendant), found by the rank's pid; 0 without a launcher run or a pid. Their summed
  /// lifetime peaks are peak_bytes["launcher.tree_rss_bytes"].
  int tree_processes = 0;
};

/// One step matched across ranks: the same path of step names (parents first, joined by
/// " / ") and the same occurrence of that path in every rank's run.
struct StepSpread {
  std::string path;
  int occurrence = 0;  ///< 0 for the first step with this path in each run, 1 the second, ...
  StepKind kind = StepKind::kCustom;
  /// Duration per rank, in the order of MergedRun::ranks; -1 where that rank lacks the step.
  std::vector<std::int64_t> duration_ns;
  std::int64_t min_ns = 0;
  std::int64_t median_ns = 0;  ///< Of the ranks that have it (mean of the middle two when even).
  std::int64_t max_ns = 0;
  int slowest_rank = -1;
  /// (max - median) / median; 0 when the median is 0.
  double excess = 0;
  /// The slowest rank exceeds the median by more than the straggler margin (never for a
  /// barrier step).
  bool straggler = false;
  /// A barrier step (label "distributed.barrier" on some rank): its time is the wait for the
  /// others, longest on the rank that came first, so it names no straggler.
  bool barrier = false;
};

/// The merged generation.
struct MergedRun {
  std::string group;
  std::string group_source;
  int world_size = 0;
  double straggler_margin = 0.10;
  /// How the clocks were aligned: "utc" (each run's UTC start), or "barrier: <path> #<n>"
  /// (the UTC starts, then each rank shifted so that this step, which every rank has and
  /// which ends when the slowest rank reaches it, ends at the same moment for all).
  std::string alignment = "utc";
  std::vector<MergedRank> ranks;  ///< By rank.
  std::vector<StepSpread> steps;  ///< In the order of the lowest rank's run.
  std::vector<Run> runs;          ///< The ranks' runs, in the order of `ranks`.
  std::optional<Run> launcher;    ///< The launcher's run, when one was given.
};

/// Merges the runs of one distributed generation: the ranks' runs (and at most one launcher
/// run). Throws genscope::Error("RunsNotOneGeneration") naming the runs when they are not
/// ranks of one generation: a run without a rank, two runs of one rank, different groups or
/// world sizes, or (for groups named by MASTER_ADDR:MASTER_PORT only, reused by every
/// launch) runs that do not overlap in time; "InvalidMergeOptions" for a negative margin.
MergedRun merge_runs(std::vector<Run> runs, const MergeOptions& options = {});

/// The merged document ("schema": "genscope.merged/1"; docs/distributed.md).
nlohmann::json to_json(const MergedRun& merged);
/// Parses a merged document. Throws genscope::Error("InvalidMergedDocument") naming the
/// field, or the run document errors of an embedded run (run_json.hpp).
MergedRun merged_from_json(const nlohmann::json& document);
/// The schema identifier of merged documents.
inline constexpr const char* kMergedSchema = "genscope.merged/1";

/// A saved document: a run document or a merged one (exactly one is set).
struct SavedDocument {
  std::optional<Run> run;
  std::optional<MergedRun> merged;
};
/// Reads a run document or a merged document, by its "schema" (read_json_document()'s
/// errors; "UnsupportedSchema" for any other schema).
SavedDocument read_saved_document(const std::filesystem::path& path);

/// The console summary: the group, each rank (host, start offset, duration, peaks) and the
/// per-step spread with stragglers marked.
std::string render_merged_summary(const MergedRun& merged, bool plain = false);
/// The HTML report of a merged generation: the ranks side by side (a column per rank: host,
/// start, duration, peaks; a row per step with each rank's time, the spread and the
/// stragglers), then the report of the ranks' runs overlaid (html_report.hpp).
std::string render_merged_html(const MergedRun& merged);
/// The merged Chrome trace: a process per rank (and the launcher), on the merged clock.
std::string render_merged_trace(const MergedRun& merged);

}  // namespace genscope
