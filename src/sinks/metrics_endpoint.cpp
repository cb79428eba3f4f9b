// MetricsEndpoint: the live /metrics endpoint (cpp-httplib server on its own thread).
//
// The dispatcher thread updates the model under `mutex`; a scrape copies the model under the
// same mutex (a few microseconds, docs/performance.md) and renders outside it, so a scrape
// never holds up the delivery of events for longer than that copy, and the pipeline's
// threads never wait on either.
#include "genscope/metrics.hpp"

#include <httplib.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/utc_time.hpp"
#include "genscope/error.hpp"
#include "report/metrics_exposition.hpp"
#include "report/metrics_model.hpp"

namespace genscope {

struct MetricsEndpoint::Impl {
  MetricsEndpointOptions options;
  mutable std::mutex mutex;
  detail::MetricsModel model;  // guarded by mutex
  httplib::Server server;
  std::thread thread;
  std::atomic<bool> finished{false};
  std::uint16_t port = 0;
  std::string error;

  detail::MetricsModel snapshot() const {
    std::lock_guard lock(mutex);
    return model;
  }
};

MetricsEndpoint::MetricsEndpoint(MetricsEndpointOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  // SO_REUSEADDR only: httplib's default adds SO_REUSEPORT on some versions, which would let
  // a second server bind the same port silently instead of reporting it in use.
  s.server.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // No keep-alive and short timeouts: stopping never waits long for an idle scraper.
  s.server.set_keep_alive_max_count(1);
  s.server.set_read_timeout(2, 0);
  s.server.set_write_timeout(2, 0);
  s.server.new_task_queue = [] { return new httplib::ThreadPool(2); };
  Impl* impl = impl_.get();
  s.server.Get("/metrics", [impl](const httplib::Request& req, httplib::Response& res) {
    const MetricsFormat format = negotiate_metrics_format(req.get_header_value("Accept"));
    const detail::MetricsModel model = impl->snapshot();
    res.set_content(detail::write_exposition(model.families(detail::unix_now_ns()), format),
                    std::string(metrics_content_type(format)).c_str());
  });
  s.server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
        res.status = 500;
        res.set_content("genscope: metrics rendering failed\n", "text/plain");
      });

  const std::string where = s.options.bind_address + ":" + std::to_string(s.options.port);
  errno = 0;
  int bound = -1;
  if (s.options.port == 0) {
    bound = s.server.bind_to_any_port(s.options.bind_address);
  } else if (s.server.bind_to_port(s.options.bind_address, s.options.port)) {
    bound = s.options.port;
  }
  if (bound <= 0) {
    const int err = errno;
    s.error = "cannot serve metrics on " + where +
              (err != 0 ? std::string(": ") + std::strerror(err)
                        : std::string(": address not available or port in use"));
    return;
  }
  s.port = static_cast<std::uint16_t>(bound);
  s.thread = std::thread([impl] {
    impl->server.listen_after_bind();
    impl->finished = true;
  });
}

MetricsEndpoint::~MetricsEndpoint() {
  if (!impl_->thread.joinable()) return;
  // stop() is a no-op until the listen loop has started; repeat it until the thread ends.
  while (!impl_->finished) {
    impl_->server.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  impl_->thread.join();
}

std::uint16_t MetricsEndpoint::port() const noexcept { return impl_->port; }

std::string MetricsEndpoint::url() const {
  if (impl_->port == 0) return {};
  const std::string& host = impl_->options.bind_address;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(impl_->port) +
         "/metrics";
}

std::string MetricsEndpoint::error() const { return impl_->error; }

std::string MetricsEndpoint::render(MetricsFormat format) const {
  return detail::write_exposition(impl_->snapshot().families(detail::unix_now_ns()), format);
}

void MetricsEndpoint::run_started(const Run& run) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->model.run_started(run);
  }
  if (!impl_->error.empty()) throw Error("MetricsUnavailable", impl_->error);
}

void MetricsEndpoint::step_began(const StepRecord& step) {
  std::lock_guard lock(impl_->mutex);
  impl_->model.step_began(step);
}

void MetricsEndpoint::iteration(int step_id, std::size_t, std::int64_t duration_ns) {
  std::lock_guard lock(impl_->mutex);
  impl_->model.iteration(step_id, duration_ns);
}

void MetricsEndpoint::step_ended(const StepRecord& step) {
  std::lock_guard lock(impl_->mutex);
  impl_->model.step_ended(step);
}

void MetricsEndpoint::sample(std::int64_t, std::span<const double> values) {
  std::lock_guard lock(impl_->mutex);
  impl_->model.sample(values);
}

void MetricsEndpoint::monitoring_error(const MonitoringError& error) {
  std::lock_guard lock(impl_->mutex);
  impl_->model.monitoring_error(error);
}

void MetricsEndpoint::run_finished(const Run& run) {
  std::lock_guard lock(impl_->mutex);
  impl_->model.run_finished(run);
}

}  // namespace genscope
