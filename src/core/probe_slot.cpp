// ProbeSlot: serialised probe calls, with a timeout guard for probes that may block.
#include "core/probe_slot.hpp"

#include <algorithm>
#include <exception>

namespace genscope::detail {

using ProbeCall = std::function<ProbeStatus(Probe&, std::span<double>)>;

struct ProbeSlot::Worker {
  struct Task {
    ProbeCall fn;
    std::vector<double> out;
    ProbeStatus status;
    bool done = false;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::shared_ptr<Task> pending;
  bool busy = false;
  bool stop = false;
  std::thread thread;

  static void loop(std::shared_ptr<Worker> self, std::shared_ptr<Probe> probe) {
    std::unique_lock lock(self->mutex);
    for (;;) {
      self->cv.wait(lock, [&] { return self->stop || self->pending != nullptr; });
      if (self->pending == nullptr) return;
      std::shared_ptr<Task> task = std::move(self->pending);
      self->pending = nullptr;
      lock.unlock();
      ProbeStatus status;
      try {
        status = task->fn(*probe, task->out);
      } catch (const std::exception& e) {
        status = ProbeStatus::failure(std::string("probe threw: ") + e.what());
      } catch (...) {
        status = ProbeStatus::failure("probe threw an unknown exception");
      }
      lock.lock();
      task->status = std::move(status);
      task->done = true;
      self->busy = false;
      self->cv.notify_all();
    }
  }
};

namespace {

ProbeStatus call_inline(Probe& probe, const ProbeCall& fn, std::span<double> out) {
  try {
    return fn(probe, out);
  } catch (const std::exception& e) {
    return ProbeStatus::failure(std::string("probe threw: ") + e.what());
  } catch (...) {
    return ProbeStatus::failure("probe threw an unknown exception");
  }
}

}  // namespace

ProbeSlot::ProbeSlot(std::unique_ptr<Probe> probe, std::chrono::milliseconds timeout)
    : probe_(std::move(probe)), timeout_(timeout) {
  name_ = probe_->name();
  if (probe_->may_block()) {
    worker_ = std::make_shared<Worker>();
    worker_->thread = std::thread(&Worker::loop, worker_, probe_);
  }
}

ProbeSlot::~ProbeSlot() {
  if (worker_ == nullptr) return;
  bool hung = false;
  {
    std::lock_guard lock(worker_->mutex);
    worker_->stop = true;
    hung = worker_->busy;
    worker_->cv.notify_all();
  }
  // A call stuck in a driver cannot be interrupted: leave the thread to finish on its own
  // (it owns references to the probe and the worker state).
  if (hung) {
    worker_->thread.detach();
  } else {
    worker_->thread.join();
  }
}

ProbeStatus ProbeSlot::call(const std::function<ProbeStatus(Probe&)>& fn) {
  std::vector<double> none;
  // Captured by value: a timed-out call may still run after this frame is gone.
  return call_span([fn](Probe& p, std::span<double>) { return fn(p); }, none);
}

ProbeStatus ProbeSlot::call_span(const ProbeCall& fn, std::span<double> out) {
  std::lock_guard serial(mutex_);
  if (worker_ == nullptr) return call_inline(*probe_, fn, out);
  auto task = std::make_shared<Worker::Task>();
  task->fn = fn;
  task->out.assign(out.size(), std::numeric_limits<double>::quiet_NaN());
  std::unique_lock lock(worker_->mutex);
  if (worker_->busy) {
    return ProbeStatus::failure(name_ + " probe: a previous call is still blocked; skipped");
  }
  worker_->pending = task;
  worker_->busy = true;
  worker_->cv.notify_all();
  if (!worker_->cv.wait_for(lock, timeout_, [&] { return task->done; })) {
    return ProbeStatus::failure(name_ + " probe: call did not return within " +
                                std::to_string(timeout_.count()) + " ms (hung); skipped");
  }
  std::copy(task->out.begin(), task->out.end(), out.begin());
  return task->status;
}

ProbeStatus ProbeSlot::open() {
  {
    std::lock_guard serial(mutex_);
    if (open_attempted_) return open_status_;
  }
  ProbeStatus status = call([](Probe& p) { return p.open(); });
  std::lock_guard serial(mutex_);
  open_attempted_ = true;
  open_status_ = status;
  opened_ok_ = status.ok();
  if (opened_ok_) {
    for (const MetricInfo& m : probe_->metrics()) has_exact_peaks_ = has_exact_peaks_ || m.exact_peak;
    has_parts_ = probe_->has_parts();
  }
  return status;
}

std::vector<GpuInfo> ProbeSlot::gpus() {
  if (!opened_ok_) return {};
  auto result = std::make_shared<std::vector<GpuInfo>>();
  const ProbeStatus status = call([result](Probe& p) {
    *result = p.gpus();
    return ProbeStatus{};
  });
  if (!status.ok()) return {};
  return *result;
}

ProbeStatus ProbeSlot::sample(std::span<double> out) {
  return call_span([](Probe& p, std::span<double> o) { return p.sample(o); }, out);
}

ProbeStatus ProbeSlot::read_peaks(std::span<double> out) {
  return call_span([](Probe& p, std::span<double> o) { return p.read_peaks(o); }, out);
}

ProbeStatus ProbeSlot::reset_peaks() {
  return call([](Probe& p) { return p.reset_peaks(); });
}

ProbeStatus ProbeSlot::read_parts(std::vector<FigurePart>& out) {
  // Filled on the worker (a blocking probe's call may outlive this frame): shared result.
  auto result = std::make_shared<std::vector<FigurePart>>();
  const ProbeStatus status = call([result](Probe& p) { return p.read_parts(*result); });
  out.clear();
  if (status.ok()) out = std::move(*result);  // a timed-out call may still be writing it
  return status;
}

}  // namespace genscope::detail
