// HistorySink: one history row per finished run.
#include "sinks/history_sink.hpp"

#include <exception>

#include "genscope/error.hpp"
#include "genscope/history.hpp"

namespace genscope::detail {

void HistorySink::run_finished(const Run& run) {
  try {
    record_run(db_, run);
  } catch (const std::exception& e) {
    throw Error("HistoryWriteFailed", std::string("run not recorded: ") + e.what());
  }
}

}  // namespace genscope::detail
