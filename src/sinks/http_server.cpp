// The metrics endpoint's HTTP server (see http_server.hpp).
#include "sinks/http_server.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <list>
#include <thread>
#include <vector>

namespace genscope::detail {
namespace {

using Clock = std::chrono::steady_clock;

struct Connection {
  int fd = -1;
  Clock::time_point deadline;
  std::string in;   // the request head read so far
  std::string out;  // the answer, once known
  std::size_t sent = 0;
  std::function<void()> on_sent;  // HttpAnswer::on_sent of that answer
};

bool iequals_prefix(std::string_view line, std::string_view name) {
  if (line.size() < name.size()) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(line[i])) != name[i]) return false;
  }
  return true;
}

std::string answer(int status, std::string_view reason, std::string_view content_type,
                   std::string_view body, bool head) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                    "\r\nContent-Type: " + std::string(content_type) +
                    "\r\nContent-Length: " + std::to_string(body.size()) +
                    "\r\nConnection: close\r\n\r\n";
  if (!head) out += body;
  return out;
}

// The answer to a complete request head (`on_sent`: the handler's, for a 200).
std::string respond(std::string_view request, const HttpServer::Handler& handler,
                    std::function<void()>& on_sent) {
  const std::size_t eol = request.find("\r\n");
  const std::string_view line = request.substr(0, eol);
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) {
    return answer(400, "Bad Request", "text/plain", "bad request line\n", false);
  }
  const std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));
  const bool head = method == "HEAD";
  if (method != "GET" && !head) {
    return answer(405, "Method Not Allowed", "text/plain", "only GET /metrics\n", false);
  }
  if (target != "/metrics") {
    return answer(404, "Not Found", "text/plain", "genscope serves /metrics\n", head);
  }
  std::string_view accept;
  std::string_view rest = request.substr(eol == std::string_view::npos ? request.size() : eol + 2);
  while (!rest.empty()) {
    const std::size_t end = rest.find("\r\n");
    const std::string_view header = rest.substr(0, end);
    if (iequals_prefix(header, "accept:")) {
      accept = header.substr(7);
      while (!accept.empty() && (accept.front() == ' ' || accept.front() == '\t')) {
        accept.remove_prefix(1);
      }
    }
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 2);
  }
  try {
    HttpAnswer a = handler(accept);
    on_sent = std::move(a.on_sent);
    return answer(200, "OK", a.content_type, a.body, head);
  } catch (...) {
    return answer(500, "Internal Server Error", "text/plain",
                  "genscope: metrics rendering failed\n", head);
  }
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  int listen_fd = -1;
  int wake[2] = {-1, -1};
  std::uint16_t port = 0;
  std::string error;
  std::thread thread;

  void loop();
};

HttpServer::HttpServer(HttpServerOptions options, Handler handler)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.options = std::move(options);
  s.handler = std::move(handler);
  const std::string where = s.options.bind_address + ":" + std::to_string(s.options.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(s.options.port);
  const int gai = ::getaddrinfo(s.options.bind_address.c_str(), service.c_str(), &hints, &found);
  if (gai != 0) {
    s.error = "cannot serve metrics on " + where + ": " + ::gai_strerror(gai);
    return;
  }
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr && s.listen_fd < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_errno = errno;
      continue;
    }
    // SO_REUSEADDR only (no SO_REUSEPORT: a second server must not share the port silently).
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      s.listen_fd = fd;
    } else {
      last_errno = errno;
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (s.listen_fd < 0) {
    s.error = "cannot serve metrics on " + where + ": " + std::strerror(last_errno);
    return;
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(s.listen_fd, reinterpret_cast<sockaddr*>(&bound), &len);
  s.port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                             : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    s.error = std::string("cannot serve metrics: pipe: ") + std::strerror(errno);
    ::close(s.listen_fd);
    s.listen_fd = -1;
    s.port = 0;
    return;
  }
  Impl* impl = impl_.get();
  s.thread = std::thread([impl] { impl->loop(); });
}

HttpServer::~HttpServer() {
  Impl& s = *impl_;
  if (s.thread.joinable()) {
    const char byte = 0;
    while (::write(s.wake[1], &byte, 1) < 0 && errno == EINTR) {
    }
    s.thread.join();
  }
  for (int fd : {s.listen_fd, s.wake[0], s.wake[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

std::uint16_t HttpServer::port() const noexcept { return impl_->port; }
std::string HttpServer::error() const { return impl_->error; }

void HttpServer::Impl::loop() {
  std::list<Connection> conns;
  std::vector<pollfd> fds;
  std::vector<Connection*> owners;
  char buf[4096];
  for (;;) {
    const Clock::time_point now = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {  // past their deadline: closed
      if (it->deadline <= now) {
        ::close(it->fd);
        it = conns.erase(it);
      } else {
        ++it;
      }
    }
    fds.clear();
    owners.clear();
    fds.push_back({wake[0], POLLIN, 0});
    fds.push_back({conns.size() < options.max_connections ? listen_fd : -1, POLLIN, 0});
    Clock::time_point next = now + std::chrono::hours(1);
    for (Connection& c : conns) {
      fds.push_back({c.fd, static_cast<short>(c.out.empty() ? POLLIN : POLLOUT), 0});
      owners.push_back(&c);
      next = std::min(next, c.deadline);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now).count();
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<long long>(wait, 0)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents != 0) break;  // stop
    if (fds[1].revents & POLLIN) {
      for (std::size_t k = 0; k < 16 && conns.size() < options.max_connections; ++k) {
        const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        conns.push_back({fd, Clock::now() + options.connection_deadline, {}, {}, 0, {}});
      }
    }
    for (std::size_t i = 0; i < owners.size(); ++i) {
      Connection& c = *owners[i];
      const short ev = fds[i + 2].revents;
      if (ev == 0) continue;
      bool done = false;
      if (c.out.empty()) {
        const ssize_t got = ::recv(c.fd, buf, sizeof buf, 0);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
          done = true;
        } else if (got > 0) {
          c.in.append(buf, static_cast<std::size_t>(got));
          const std::size_t end = c.in.find("\r\n\r\n");
          if (end != std::string::npos) {
            c.out = respond(std::string_view(c.in).substr(0, end + 2), handler, c.on_sent);
          } else if (c.in.size() > options.max_request_bytes) {
            c.out = answer(431, "Request Header Fields Too Large", "text/plain",
                           "request head too large\n", false);
          }
        }
      } else {
        const ssize_t put =
            ::send(c.fd, c.out.data() + c.sent, c.out.size() - c.sent, MSG_NOSIGNAL);
        if (put < 0 && errno != EAGAIN && errno != EINTR) {
          done = true;
        } else if (put > 0) {
          c.sent += static_cast<std::size_t>(put);
          if (c.sent == c.out.size()) {
            ::shutdown(c.fd, SHUT_WR);
            done = true;
            if (c.on_sent) c.on_sent();
          }
        }
      }
      if (done) {
        ::close(c.fd);
        c.fd = -1;
      }
    }
    conns.remove_if([](const Connection& c) { return c.fd < 0; });
  }
  for (Connection& c : conns) ::close(c.fd);
}

}  // namespace genscope::detail
