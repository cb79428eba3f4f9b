// The run journal: the run in progress kept on disk, so that a monitor killed before the run
// ends (kill -9, an OOM kill, a crash) leaves its figures up to the last step end behind.
//
// Example:
//   monitor.add_sink(genscope::make_journal_sink("runs/run.journal.json"));
//   // ... if the process dies mid-run: genscope report runs/run.journal.json
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>

#include "genscope/sink.hpp"

namespace genscope {

/// A sink that writes the run so far (its metadata, every step that has ended, its monitoring
/// errors) to `path` as a run document, atomically (write_run_file), when a step ends — at
/// most once per `min_interval`; steps ended in between go with the next step end or the
/// first sample after the interval (so with the sampler on, no ended step waits longer than
/// min_interval plus the sampler's longest interval) — and
/// removes the file when the run finishes normally. The document carries the label
/// `genscope.journal` = "partial" and a note saying where it stops. Failures to write are
/// monitoring errors of the run (source "journal"), never exceptions into the pipeline.
std::shared_ptr<Sink> make_journal_sink(std::filesystem::path path,
                                        std::chrono::milliseconds min_interval =
                                            std::chrono::milliseconds(200));

}  // namespace genscope
