// OtlpExporter: a bounded queue of encoded runs and the thread that delivers them
// (genscope/otlp.hpp). submit() encodes and queues; the thread posts with retries; wait()
// lets the caller take a run's outcome within a bound; what nobody waited for is kept for
// take_unreported_failures().
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "genscope/otlp.hpp"
#include "otlp/otlp_delivery.hpp"

namespace genscope {

struct OtlpExporter::State {
  OtlpOptions options;
  OtlpTargets targets;
  std::mutex mutex;
  std::condition_variable wake;  // the thread: work or stop
  std::condition_variable done;  // waiters: an outcome
  struct Entry {
    OtlpOutcome outcome = OtlpOutcome::kPending;
    std::string run_id;
    std::string error;
    bool abandoned = false;  // a waiter gave up: report a failure through the unreported list
  };
  std::deque<std::pair<std::uint64_t, detail::otlp::EncodedRun>> queue;
  std::map<std::uint64_t, Entry> entries;
  std::vector<std::string> unreported;
  OtlpCounts counts;
  std::uint64_t next_ticket = 0;
  bool stop = false;
  bool exited = false;

  void finish(std::uint64_t ticket, const std::string& error) {
    std::lock_guard lock(mutex);
    --counts.pending;
    auto it = entries.find(ticket);
    if (error.empty()) {
      ++counts.delivered;
    } else {
      ++counts.failed;
    }
    if (it != entries.end()) {
      it->second.outcome = error.empty() ? OtlpOutcome::kDelivered : OtlpOutcome::kFailed;
      it->second.error = error;
      if (it->second.abandoned) {
        if (!error.empty()) unreported.push_back("run " + it->second.run_id + ": " + error);
        entries.erase(it);
      }
    }
    done.notify_all();
  }

  static void loop(std::shared_ptr<State> s) {
    while (true) {
      std::pair<std::uint64_t, detail::otlp::EncodedRun> item;
      {
        std::unique_lock lock(s->mutex);
        s->wake.wait(lock, [&] { return s->stop || !s->queue.empty(); });
        if (s->queue.empty()) break;  // stop, and nothing left
        item = std::move(s->queue.front());
        s->queue.pop_front();
      }
      std::string error;
      try {
        error = detail::otlp::deliver(item.second, s->targets,
                                      std::chrono::steady_clock::now() + s->options.retry_deadline,
                                      [&](std::chrono::milliseconds d) {
                                        std::unique_lock lock(s->mutex);
                                        return !s->wake.wait_for(lock, d, [&] { return s->stop; });
                                      });
      } catch (const std::exception& e) {
        error = e.what();
      }
      s->finish(item.first, error);
    }
    std::lock_guard lock(s->mutex);
    s->exited = true;
    s->done.notify_all();
  }
};

OtlpExporter::OtlpExporter(OtlpOptions options) : state_(std::make_shared<State>()) {
  state_->targets = resolve_otlp_targets(options);
  state_->options = std::move(options);
  if (state_->options.queue_capacity == 0) state_->options.queue_capacity = 1;
  std::thread(&State::loop, state_).detach();  // owns the state; exits on stop
}

OtlpExporter::~OtlpExporter() {
  std::unique_lock lock(state_->mutex);
  // Queued runs get up to `wait` to go out; then the thread is told to stop (a backoff ends at
  // once, a request in flight within its timeout) and is left to end on its own.
  state_->done.wait_for(lock, state_->options.wait,
                        [&] { return state_->queue.empty() && state_->counts.pending == 0; });
  state_->stop = true;
  state_->wake.notify_all();
}

std::uint64_t OtlpExporter::submit(const Run& run) noexcept {
  std::uint64_t ticket = 0;
  try {
    detail::otlp::EncodedRun encoded{run.id, encode_otlp_traces(run, state_->options.service_name),
                                     encode_otlp_metrics(run, state_->options.service_name)};
    std::lock_guard lock(state_->mutex);
    ticket = ++state_->next_ticket;
    State::Entry& entry = state_->entries[ticket];
    entry.run_id = run.id;
    if (state_->queue.size() >= state_->options.queue_capacity || state_->stop) {
      ++state_->counts.dropped;
      entry.outcome = OtlpOutcome::kDropped;
      entry.error = "export queue full (" + std::to_string(state_->options.queue_capacity) +
                    " runs waiting): run dropped";
      return ticket;
    }
    ++state_->counts.pending;
    state_->queue.emplace_back(ticket, std::move(encoded));
    state_->wake.notify_all();
  } catch (const std::exception& e) {
    std::lock_guard lock(state_->mutex);
    if (ticket == 0) ticket = ++state_->next_ticket;
    State::Entry& entry = state_->entries[ticket];
    entry.run_id = run.id;
    entry.outcome = OtlpOutcome::kDropped;
    entry.error = std::string("not encoded: ") + e.what();
    ++state_->counts.dropped;
  } catch (...) {
  }
  return ticket;
}

OtlpOutcome OtlpExporter::wait(std::uint64_t ticket, std::chrono::milliseconds wait,
                               std::string* error) {
  std::unique_lock lock(state_->mutex);
  auto it = state_->entries.find(ticket);
  if (it == state_->entries.end()) return OtlpOutcome::kPending;
  state_->done.wait_for(lock, wait, [&] {
    it = state_->entries.find(ticket);
    return it == state_->entries.end() || it->second.outcome != OtlpOutcome::kPending;
  });
  it = state_->entries.find(ticket);
  if (it == state_->entries.end()) return OtlpOutcome::kPending;
  const OtlpOutcome outcome = it->second.outcome;
  if (outcome == OtlpOutcome::kPending) {
    it->second.abandoned = true;
    return outcome;
  }
  if (error != nullptr) *error = it->second.error;
  state_->entries.erase(it);
  return outcome;
}

std::string OtlpExporter::send(const Run& run) {
  const std::uint64_t ticket = submit(run);
  const std::chrono::milliseconds waited = state_->options.wait;
  std::string error;
  const OtlpOutcome outcome = wait(ticket, waited, &error);
  std::vector<std::string> problems;
  if (outcome == OtlpOutcome::kFailed || outcome == OtlpOutcome::kDropped) {
    problems.push_back("run not exported: " + error);
  } else if (outcome == OtlpOutcome::kPending) {
    problems.push_back("run not confirmed by " + traces_url() + " within " +
                       std::to_string(waited.count()) +
                       " ms (the export goes on in the background)");
  }
  for (std::string& earlier : take_unreported_failures())
    problems.push_back("an earlier " + earlier);
  if (problems.empty()) return {};
  std::string message;
  for (const std::string& p : problems) message += (message.empty() ? "" : "; ") + p;
  const OtlpCounts c = counts();
  return message + " [delivered " + std::to_string(c.delivered) + ", failed " +
         std::to_string(c.failed) + ", dropped " + std::to_string(c.dropped) + "]";
}

std::vector<std::string> OtlpExporter::take_unreported_failures() {
  std::lock_guard lock(state_->mutex);
  return std::exchange(state_->unreported, {});
}

OtlpCounts OtlpExporter::counts() const {
  std::lock_guard lock(state_->mutex);
  return state_->counts;
}

const std::string& OtlpExporter::traces_url() const noexcept { return state_->targets.traces_url; }

}  // namespace genscope
