// BufferedObserver: a bounded queue of observer events and one delivery thread.
//
// Output chunks count against the capacity and are dropped (counted) when it is full. Event
// lines are never dropped: past twice the capacity the caller (the pass-through loop) waits
// until the analysis made room, so the event pipe is not read meanwhile and its writer
// waits too (back-pressure). Reaped processes and forwarded signals are few and always
// kept; ticks are only queued when nothing else waits.
#include "genscope/buffered_observer.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace genscope {

// The delivery thread's nice value: weight 110 against a normal thread's 1024, so it still
// gets about a tenth of a core that the program keeps busy.
constexpr int kAnalysisNice = 10;

struct BufferedObserver::State {
  enum class Kind { kOutput, kEventLine, kReaped, kSignal, kTick };
  struct Event {
    Kind kind;
    int stream_or_pid_or_signal = 0;
    int status = 0;
    double maxrss = 0;
    std::int64_t steady_ns = 0;
    std::string bytes;
  };

  ChildObserver* inner = nullptr;
  std::size_t capacity = 0;
  std::mutex mutex;
  std::condition_variable cv;
  std::condition_variable room;  // an event line waits here for the queue to shrink
  int waiting_for_room = 0;
  std::deque<Event> queue;
  std::size_t queued_bytes = 0;
  std::uint64_t dropped = 0;
  std::uint64_t dropped_event_lines = 0;  // not analysed: finish()'s budget ran out
  // After finish(budget): output and event lines still queued past this time are counted,
  // not analysed, so that the caller returns within the budget.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  bool stop = false;
  std::string error;
  std::thread thread;
  // Byte buffers kept for reuse: a fresh 256 KiB string per chunk would be a fresh mmap,
  // page faults and zeroing for every chunk.
  std::vector<std::string> spare;

  std::string take_buffer_locked(std::string_view bytes) {
    std::string buffer;
    if (!spare.empty()) {
      buffer = std::move(spare.back());
      spare.pop_back();
    }
    buffer.assign(bytes);
    return buffer;
  }

  void push(Event event, std::string_view bytes, bool droppable) {
    {
      std::unique_lock lock(mutex);
      if (stop) return;
      const std::size_t limit = droppable ? capacity : 2 * capacity;
      if (event.kind == Kind::kEventLine) {
        // Back-pressure: wait for room (an empty queue always takes the line).
        ++waiting_for_room;
        room.wait(lock, [&] { return stop || queue.empty() || queued_bytes + bytes.size() <= limit; });
        --waiting_for_room;
        if (stop) return;
      }
      if (queued_bytes + bytes.size() > limit && event.kind != Kind::kEventLine) {
        if (event.kind == Kind::kOutput) dropped += bytes.size();
        return;
      }
      if (event.kind == Kind::kTick && !queue.empty()) return;
      if (!bytes.empty()) event.bytes = take_buffer_locked(bytes);
      queued_bytes += bytes.size();
      queue.push_back(std::move(event));
    }
    cv.notify_one();
  }

  void deliver(const Event& e) {
    switch (e.kind) {
      case Kind::kOutput:
        inner->output(e.stream_or_pid_or_signal, e.bytes, e.steady_ns);
        break;
      case Kind::kEventLine:
        inner->event_line(e.bytes, e.steady_ns);
        break;
      case Kind::kReaped:
        inner->reaped(e.stream_or_pid_or_signal, e.status, e.maxrss);
        break;
      case Kind::kSignal:
        inner->signal_forwarded(e.stream_or_pid_or_signal);
        break;
      case Kind::kTick:
        inner->tick(e.steady_ns);
        break;
    }
  }

  void loop() {
    // Analysis yields to the program and to the pass-through when they compete for a core
    // (the times of events are taken when they are read, not here).
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kAnalysisNice);
    std::unique_lock lock(mutex);
    for (;;) {
      cv.wait(lock, [&] { return stop || !queue.empty(); });
      if (queue.empty()) return;  // stopped and drained
      Event e = std::move(queue.front());
      queue.pop_front();
      queued_bytes -= e.bytes.size();
      if (waiting_for_room > 0) room.notify_all();
      bool failed = !error.empty();
      if (stop && (e.kind == Kind::kOutput || e.kind == Kind::kEventLine) &&
          std::chrono::steady_clock::now() > deadline) {
        if (e.kind == Kind::kOutput) dropped += e.bytes.size();
        if (e.kind == Kind::kEventLine) ++dropped_event_lines;
        failed = true;  // skipped
      }
      lock.unlock();
      if (!failed) {
        try {
          deliver(e);
        } catch (const std::exception& ex) {
          std::lock_guard relock(mutex);
          error = ex.what();
        } catch (...) {
          std::lock_guard relock(mutex);
          error = "non-standard exception";
        }
      }
      lock.lock();
      if (e.bytes.capacity() > 0 && spare.size() < 16) spare.push_back(std::move(e.bytes));
    }
  }
};

BufferedObserver::BufferedObserver(ChildObserver& inner, std::size_t capacity_bytes)
    : state_(std::make_shared<State>()) {
  state_->inner = &inner;
  state_->capacity = capacity_bytes;
  state_->thread = std::thread([s = state_] { s->loop(); });
}

BufferedObserver::~BufferedObserver() { finish(); }

void BufferedObserver::output(int stream, std::string_view bytes, std::int64_t steady_ns) {
  state_->push({State::Kind::kOutput, stream, 0, 0, steady_ns, {}}, bytes, true);
}

void BufferedObserver::event_line(std::string_view line, std::int64_t steady_ns) {
  state_->push({State::Kind::kEventLine, 0, 0, 0, steady_ns, {}}, line, false);
}

void BufferedObserver::reaped(int pid, int wait_status, double maxrss_bytes) {
  state_->push({State::Kind::kReaped, pid, wait_status, maxrss_bytes, 0, {}}, {}, false);
}

void BufferedObserver::signal_forwarded(int signal) {
  state_->push({State::Kind::kSignal, signal, 0, 0, 0, {}}, {}, false);
}

void BufferedObserver::tick(std::int64_t steady_ns) {
  state_->push({State::Kind::kTick, 0, 0, 0, steady_ns, {}}, {}, true);
}

void BufferedObserver::finish(std::chrono::milliseconds budget) {
  {
    std::lock_guard lock(state_->mutex);
    if (state_->stop && !state_->thread.joinable()) return;
    state_->stop = true;
    if (budget != std::chrono::milliseconds::max())
      state_->deadline = std::chrono::steady_clock::now() + budget;
  }
  state_->cv.notify_all();
  state_->room.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

std::uint64_t BufferedObserver::dropped_bytes() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->dropped;
}

std::uint64_t BufferedObserver::dropped_event_lines() const noexcept {
  std::lock_guard lock(state_->mutex);
  return state_->dropped_event_lines;
}

std::string BufferedObserver::inner_error() const {
  std::lock_guard lock(state_->mutex);
  return state_->error;
}

}  // namespace genscope
