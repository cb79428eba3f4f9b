// EventChannelSink: forwards an in-process run to the `genscope run` / `genscope watch`
// that started this process, on the descriptor named by GENSCOPE_EVENTS_FD (docs/run.md,
// "Event channel"). A Monitor registers it by itself when that variable is set.
//
// Lines written (src/watch/event_codec.hpp):
//   run_started  -> {"event":"run_begin", "name", "pipeline", "labels" (+ inprocess.run_id)}
//   step_began   -> {"event":"begin", "kind", "name", "ref": "<pid>.<monitor>:<run>:<step id>"}
//   step_ended   -> {"event":"step", "ref", "start_steady_ns", "step": <run document step>}
//   run_finished -> {"event":"run_end", "attachments", "notes", "monitoring_errors"}
//
// A parent that stops reading never stalls this process: the sink writes on its own
// non-blocking open file description of the pipe (/proc/self/fd/N, so a shell sharing the
// descriptor keeps blocking writes), waits at most 100 ms for room, then drops the line with
// a monitoring error (and waits no more until a write goes through again); a parent that is
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
  /// `fd_text`: the value of GENSCOPE_EVENTS_FD. A bad value is reported when a run starts.
  explicit EventChannelSink(const std::string& fd_text);
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
  bool reopened_ = false;  // fd_ has its own non-blocking file description
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
