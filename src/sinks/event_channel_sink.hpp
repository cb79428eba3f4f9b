// EventChannelSink: forwards an in-process run to the `genscope run` / `genscope watch`
// that started this process, on the descriptor named by GENSCOPE_EVENTS_FD (docs/run.md,
// "Event channel"). A Monitor registers it by itself when that variable is set.
//
// Lines written (the format: src/event_line/, encoded by src/event_line/encode.hpp):
//   run_started  -> {"event":"run_begin", "name", "pipeline", "labels" (+ inprocess.run_id)}
//   step_began   -> {"event":"begin", "kind", "name", "ref": "<pid>.<monitor>:<run>:<step id>"}
//   step_ended   -> {"event":"step", "ref", "start_steady_ns", "step": <run document step>}
//   run_finished -> {"event":"run_end", "attachments", "notes", "monitoring_errors"}
//
// Only genscope's own pipe is written into: GENSCOPE_EVENTS_FD must name a pipe (or socket)
// whose identity (st_dev:st_ino) is GENSCOPE_EVENTS_ID, both set by `genscope run`; anything
// else (a stale variable inherited by a worker whose descriptor N is now one of its files, a
// variable set by hand) is ignored with a monitoring error, and nothing is written. The sink
// writes on its own duplicate of the descriptor (never a reopened /proc/self/fd/N).
//
// A parent that stops reading never stalls this process: each write is at most PIPE_BUF
// bytes after POLLOUT, the sink waits at most 100 ms for room, then drops the line with a
// monitoring error (and waits no more until a write goes through again); a parent that is
// gone (EPIPE) never raises SIGPIPE here. Lines up to PIPE_BUF (4096) bytes are atomic with
// respect to other writers of the same pipe; a longer one (a step with large attachments)
// can interleave with theirs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "genscope/sink.hpp"

namespace genscope::detail {

/// Writes a Monitor's runs and steps as event-channel lines.
class EventChannelSink final : public Sink {
 public:
  /// `fd_text`, `id_text`: the values of GENSCOPE_EVENTS_FD and GENSCOPE_EVENTS_ID. A bad
  /// value, or a descriptor that is not that pipe, is reported when a run starts.
  EventChannelSink(const std::string& fd_text, const std::string& id_text);
  ~EventChannelSink() override;
  EventChannelSink(const EventChannelSink&) = delete;
  EventChannelSink& operator=(const EventChannelSink&) = delete;

  std::string name() const override { return "events"; }
  unsigned events() const override { return kRunEvents | kStepEvents; }
  void run_started(const Run& run) override;
  void step_began(const StepRecord& step) override;
  void step_ended(const StepRecord& step) override;
  void run_finished(const Run& run) override;

 private:
  void write_line(std::string line);
  std::string ref(int step_id) const;

  int fd_ = -1;          // our own descriptor (closed by the destructor)
  bool socket_ = false;  // send(MSG_DONTWAIT | MSG_NOSIGNAL) instead of write()
  std::string setup_error_;
  bool stalled_ = false;      // the last line found no room: do not wait again
  bool cut_line_ = false;     // a line was cut short: start the next with '\n'
  bool gone_ = false;         // the reader closed the pipe
  int pid_ = 0;
  int sink_number_ = 0;  // this process's monitors are numbered, so refs never meet
  std::uint64_t run_seq_ = 0;
  std::int64_t run_start_steady_ns_ = 0;
};

/// The sink GENSCOPE_EVENTS_FD asks for, or nullptr when it is not set.
std::shared_ptr<Sink> make_event_channel_sink_from_env();

}  // namespace genscope::detail
