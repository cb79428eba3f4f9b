// HistorySink: records every finished run in the SQLite history (MonitorOptions::record).
#pragma once

#include <filesystem>
#include <string>

#include "genscope/sink.hpp"

namespace genscope::detail {

class HistorySink final : public Sink {
 public:
  /// `db`: the database path; empty = the default ($XDG_DATA_HOME/genscope/history.db).
  explicit HistorySink(std::string db) : db_(std::move(db)) {}
  std::string name() const override { return "history"; }
  unsigned events() const override { return kRunEvents; }
  /// Records the run; a failure becomes the run's monitoring error "run not recorded: ...".
  void run_finished(const Run& run) override;

 private:
  std::string db_;
};

}  // namespace genscope::detail
