// A small HTTP/1.1 server for GET /metrics (private to src/sinks): one thread, poll(2) over
// non-blocking sockets, so no client can hold up another or the server's shutdown.
//
// Bounds (docs/metrics.md, "The endpoint under slow or many clients"): every connection has
// one deadline for reading its request and writing the answer (a client sending one byte a
// second is closed when it passes); at most `max_connections` are open at once (beyond that
// the kernel's listen backlog, SOMAXCONN, holds new ones until a slot frees); a request head
// over `max_request_bytes` is answered 431 and closed; one request per connection
// (Connection: close). Stopping wakes the loop at once and closes every connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace genscope::detail {

struct HttpServerOptions {
  std::string bind_address = "127.0.0.1";
  std::uint16_t port = 0;  ///< 0 = a free port chosen by the system.
  std::size_t max_connections = 64;
  std::chrono::milliseconds connection_deadline{5000};
  std::size_t max_request_bytes = 16 * 1024;
};

/// The answer to GET /metrics.
struct HttpAnswer {
  std::string content_type;
  std::string body;
  /// Called on the server's thread once the whole answer was handed to the kernel (never when
  /// the client went away, its deadline passed or the server stopped first).
  std::function<void()> on_sent;
};

class HttpServer {
 public:
  /// Called on the server's thread for each GET /metrics with the request's Accept header.
  using Handler = std::function<HttpAnswer(std::string_view accept)>;

  /// Binds, listens and starts serving; on failure error() says why (nothing thrown).
  HttpServer(HttpServerOptions options, Handler handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  std::uint16_t port() const noexcept;
  std::string error() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace genscope::detail
