// RankRunSink: writes each finished run of a rank into the folder `genscope run --out DIR`
// names in GENSCOPE_RANK_RUN_DIR (DIR/ranks), as rank<R>.json (rank<R>-2.json, ... for the
// rank's later runs), so the launcher's run and every rank's run lie side by side for
// `genscope merge` (docs/distributed.md).
#pragma once

#include <filesystem>
#include <mutex>
#include <string>

#include "genscope/sink.hpp"

namespace genscope::detail {

class RankRunSink final : public Sink {
 public:
  explicit RankRunSink(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::string name() const override { return "rank_runs"; }
  unsigned events() const override { return kRunEvents; }
  /// Writes the run (atomically) when it is a rank's; a failure is a monitoring error.
  void run_finished(const Run& run) override;
  /// The file the next run of `rank` goes to: the first of rank<R>.json, rank<R>-2.json, ...
  /// that does not exist yet.
  std::filesystem::path next_path(int rank) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace genscope::detail
