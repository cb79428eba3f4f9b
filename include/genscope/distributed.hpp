// Where a run stands in a distributed job: its rank, the world size, the local and node rank
// and the id of the group (one launch of the job) that its ranks share.
//
// A run started in a torch.distributed process (torchrun, torch.multiprocessing with the
// usual variables) reads this from its environment when it starts (Monitor::start_run);
// genscope.torch also reads an initialised process group. The merge of the ranks of one
// generation (merge.hpp) relies on the group id. docs/distributed.md.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace genscope {

/// The distributed identity of a run (the run document's "distributed" object).
struct DistributedInfo {
  /// "rank": a process of the job; "launcher": the program that started the ranks
  /// (`genscope run -- torchrun ...`), which has no rank of its own.
  std::string role = "rank";
  int rank = -1;        ///< Global rank (RANK); -1 for the launcher.
  int world_size = 0;   ///< Number of ranks (WORLD_SIZE); 0 when unknown.
  int local_rank = -1;  ///< Rank on its machine (LOCAL_RANK); -1 when unknown.
  int node_rank = -1;   ///< The machine's rank among the job's machines (GROUP_RANK); -1 unknown.
  /// The id every rank of one launch shares; empty when nothing names it.
  std::string group;
  /// Where `group` came from: "genscope" (GENSCOPE_DISTRIBUTED_GROUP, set by `genscope run`),
  /// "torchelastic" (TORCHELASTIC_RUN_ID, with ".restart<N>" after a restart), "master"
  /// (MASTER_ADDR:MASTER_PORT: the same for every launch on that address, so merged runs must
  /// also overlap in time), "process_group" (an initialised torch.distributed group's
  /// init method), or empty.
  std::string group_source;
  /// The rank's process id (0 unknown): set when a run starts or takes its identity, so that
  /// the launcher's process tree can tell each rank's processes apart (merge.hpp).
  int pid = 0;
};

/// Reads one environment variable; nullptr when unset. Tests pass their own.
using EnvironmentLookup = std::function<const char*(const char*)>;

/// The distributed identity the environment gives (RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK,
/// TORCHELASTIC_RUN_ID, TORCHELASTIC_RESTART_COUNT, MASTER_ADDR, MASTER_PORT,
/// GENSCOPE_DISTRIBUTED_GROUP): a rank when RANK and WORLD_SIZE are integers with
/// 0 <= RANK < WORLD_SIZE; nullopt otherwise (a launcher is marked by `genscope run` once
/// its ranks' runs are there). When RANK or WORLD_SIZE is set but not valid, nullopt and `problem` (when
/// given) says which variable and why.
std::optional<DistributedInfo> distributed_from_environment(const EnvironmentLookup& lookup,
                                                            std::string* problem = nullptr);
/// The same, from this process's environment.
std::optional<DistributedInfo> distributed_from_environment(std::string* problem = nullptr);

/// "rank 1 of 2 (local 1, node 0), group <id>" or "launcher of group <id>".
std::string describe(const DistributedInfo& info);

/// The environment variable `genscope run` sets for its command: the group id of the launch.
inline constexpr const char* kDistributedGroupVariable = "GENSCOPE_DISTRIBUTED_GROUP";
/// The environment variable naming a folder where each rank's finished runs are written
/// (`rank<R>.json`, `rank<R>-2.json`, ...): set by `genscope run --out DIR` to DIR/ranks.
inline constexpr const char* kRankRunDirVariable = "GENSCOPE_RANK_RUN_DIR";

}  // namespace genscope
