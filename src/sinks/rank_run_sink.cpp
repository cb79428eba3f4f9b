// RankRunSink: a rank's finished runs written next to the launcher's (see the header).
#include "sinks/rank_run_sink.hpp"

#include <system_error>

#include "genscope/error.hpp"
#include "genscope/run_json.hpp"

namespace genscope::detail {

std::filesystem::path RankRunSink::next_path(int rank) const {
  const std::string stem = "rank" + std::to_string(rank);
  std::filesystem::path path = dir_ / (stem + ".json");
  std::error_code ec;
  for (int n = 2; std::filesystem::exists(path, ec); ++n) {
    path = dir_ / (stem + "-" + std::to_string(n) + ".json");
  }
  return path;
}

void RankRunSink::run_finished(const Run& run) {
  if (!run.distributed || run.distributed->role != "rank") return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) throw Error("WriteFailed", "cannot create " + dir_.string() + ": " + ec.message());
  write_run_file(run, next_path(run.distributed->rank));
}

}  // namespace genscope::detail
