// MetricsEndpoint: the live /metrics endpoint (sinks/http_server: one poll thread, bounded
// connections with a deadline each, so slow clients neither block scrapes nor shutdown).
//
// The dispatcher thread updates the model under `mutex`; a scrape copies the model under the
// same mutex (a few microseconds, docs/performance.md) and renders outside it, so a scrape
// never holds up the delivery of events for longer than that copy, and the pipeline's
// threads never wait on either.
#include <condition_variable>
#include <mutex>

#include "core/utc_time.hpp"
#include "genscope/error.hpp"
#include "genscope/metrics.hpp"
#include "report/metrics_exposition.hpp"
#include "report/metrics_model.hpp"
#include "sinks/http_server.hpp"

namespace genscope {

struct MetricsEndpoint::Impl {
  MetricsEndpointOptions options;
  mutable std::mutex mutex;
  std::condition_variable final_scraped;
  detail::MetricsModel model;  // guarded by mutex
  bool final_pending = false;  // a run finished and no scrape has read it yet; guarded by mutex
  std::uint64_t final_generation = 0;  // counts run_finished calls; guarded by mutex
  std::unique_ptr<detail::HttpServer> server;

  detail::MetricsModel snapshot() const {
    std::lock_guard lock(mutex);
    return model;
  }
  // A scrape: the model as of now. A finished run's state counts as read once the answer that
  // holds it was sent whole (counted when rendered, a linger could end and close the
  // connection before the scraper had it: cli.metrics_endpoint's "final state never scraped").
  detail::HttpAnswer scrape(std::string_view accept) {
    const MetricsFormat format = negotiate_metrics_format(accept);
    bool was_final = false;
    detail::MetricsModel copy;
    {
      std::lock_guard lock(mutex);
      copy = model;
      was_final = final_pending;
    }
    detail::HttpAnswer a{std::string(metrics_content_type(format)),
                         detail::write_exposition(copy.families(detail::unix_now_ns()), format), {}};
    if (was_final) {
      const std::uint64_t generation = final_generation;
      a.on_sent = [this, generation] {
        std::lock_guard lock(mutex);
        if (final_generation != generation) return;  // a newer run began meanwhile
        final_pending = false;
        final_scraped.notify_all();
      };
    }
    return a;
  }
};

MetricsEndpoint::MetricsEndpoint(MetricsEndpointOptions options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  Impl* impl = impl_.get();
  s.server = std::make_unique<detail::HttpServer>(
      detail::HttpServerOptions{.bind_address = s.options.bind_address, .port = s.options.port},
      [impl](std::string_view accept) { return impl->scrape(accept); });
}

MetricsEndpoint::~MetricsEndpoint() {
  Impl& s = *impl_;
  if (s.server->port() != 0 && s.options.linger.count() > 0) {
    std::unique_lock lock(s.mutex);
    s.final_scraped.wait_for(lock, s.options.linger, [&s] { return !s.final_pending; });
  }
  s.server.reset();  // stops serving: every connection closed, the thread joined
}

std::uint16_t MetricsEndpoint::port() const noexcept { return impl_->server->port(); }

std::string MetricsEndpoint::url() const {
  const std::uint16_t port = impl_->server->port();
  if (port == 0) return {};
  const std::string& host = impl_->options.bind_address;
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) + "/metrics";
}

std::string MetricsEndpoint::error() const { return impl_->server->error(); }

std::string MetricsEndpoint::render(MetricsFormat format) const {
  return detail::write_exposition(impl_->snapshot().families(detail::unix_now_ns()), format);
}

void MetricsEndpoint::run_started(const Run& run) {
  {
    std::lock_guard lock(impl_->mutex);
    impl_->model.run_started(run);
    impl_->final_pending = false;
  }
  if (impl_->server->port() == 0) throw Error("MetricsUnavailable", impl_->server->error());
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
  impl_->final_pending = true;
  ++impl_->final_generation;
}

}  // namespace genscope
