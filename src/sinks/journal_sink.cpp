// JournalSink: the run in progress on disk (include/genscope/journal.hpp).
#include "genscope/journal.hpp"

#include <algorithm>
#include <string>
#include <system_error>
#include <utility>

#include "genscope/run_json.hpp"
#include "genscope/step.hpp"

namespace genscope {
namespace {

class JournalSink final : public Sink {
 public:
  JournalSink(std::filesystem::path path, std::chrono::milliseconds min_interval)
      : path_(std::move(path)), min_interval_ns_(min_interval.count() * 1'000'000) {}

  std::string name() const override { return "journal"; }
  // Samples too: a step end held back by min_interval is written at the first sample after
  // the interval (the sampler's rows come at least every max_sample_interval, and every step
  // boundary is a row), so the last steps before a kill -9 are not waiting for a step end
  // that never comes.
  unsigned events() const override {
    return kRunEvents | kStepEvents | kErrorEvents | kSampleEvents;
  }

  void run_started(const Run& run) override {
    run_ = run;
    run_.steps.clear();
    run_.series = {};
    run_.labels["genscope.journal"] = "partial";
    active_ = true;
    last_write_ns_ = 0;
    write();  // the run exists on disk from its start
  }

  void step_ended(const StepRecord& step) override {
    if (!active_) return;
    run_.steps.push_back(step);
    run_.duration_ns = std::max(run_.duration_ns, step.start_offset_ns + step.duration_ns);
    pending_ = true;
    write_if_due();
  }

  void sample(std::int64_t /*offset_ns*/, std::span<const double> /*values*/) override {
    if (active_ && pending_) write_if_due();
  }

  void monitoring_error(const MonitoringError& error) override {
    if (active_) run_.monitoring_errors.push_back(error);
  }

  void run_finished(const Run& /*run*/) override {
    active_ = false;
    std::error_code ec;
    std::filesystem::remove(path_, ec);  // the finished run is written by its owner
  }

 private:
  // Within min_interval of the last write, ended steps wait for the next step end or sample.
  void write_if_due() {
    if (Step::now_ns() - last_write_ns_ >= min_interval_ns_) write();
  }

  void write() {
    last_write_ns_ = Step::now_ns();
    pending_ = false;
    Run doc = run_;
    std::sort(doc.steps.begin(), doc.steps.end(),
              [](const StepRecord& a, const StepRecord& b) { return a.id < b.id; });
    doc.notes.push_back("journal: the run as it stood at its last step end (" +
                        std::to_string(doc.steps.size()) +
                        " steps ended); the monitor ended before the run did");
    write_run_file(doc, path_);  // throws Error: a monitoring error of the run (source "journal")
  }

  std::filesystem::path path_;
  std::int64_t min_interval_ns_;
  Run run_;
  bool active_ = false;
  bool pending_ = false;  // steps ended since the last write
  std::int64_t last_write_ns_ = 0;
};

}  // namespace

std::shared_ptr<Sink> make_journal_sink(std::filesystem::path path,
                                        std::chrono::milliseconds min_interval) {
  return std::make_shared<JournalSink>(std::move(path), min_interval);
}

}  // namespace genscope
