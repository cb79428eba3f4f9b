// Parsing the http(s) URLs genscope sends to (see http_url.hpp).
#include "sinks/http_url.hpp"

#include <algorithm>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

struct UrlContext {
  std::string_view url;
  const char* error_name;
  std::string_view what;
  std::string_view expected;
};

[[noreturn]] void fail(const UrlContext& c, const std::string& why) {
  throw Error(c.error_name, std::string(c.what) + " '" + std::string(c.url) + "': " + why +
                                " (expected " + std::string(c.expected) + ")");
}

}  // namespace

HttpUrl parse_http_url(std::string_view url, const char* error_name, std::string_view what,
                       std::string_view expected) {
  const UrlContext context{url, error_name, what, expected};
  for (char c : url) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7F) fail(context, "spaces or control characters");
  }
  std::string_view rest = url;
  HttpUrl out;
  if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
    out.origin = "http://";
  } else if (rest.starts_with("https://")) {
    rest.remove_prefix(8);
    out.origin = "https://";
  } else {
    fail(context, "the scheme must be http:// or https://");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) fail(context, "no query or fragment");
  const std::size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) fail(context, "user info is not supported");
  std::string_view host = authority;
  std::string_view port;
  if (authority.starts_with("[")) {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) fail(context, "unclosed '[' in the host");
    host = authority.substr(0, close + 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') fail(context, "unexpected text after the IPv6 address");
      port = after.substr(1);
    }
    if (host.size() <= 2) fail(context, "empty host");
  } else {
    const std::size_t colon = authority.find(':');
    if (colon != std::string_view::npos) {
      host = authority.substr(0, colon);
      port = authority.substr(colon + 1);
      if (port.empty()) fail(context, "empty port");
    }
  }
  if (host.empty()) fail(context, "no host");
  if (!port.empty() || authority.ends_with(":")) {
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      fail(context, "the port must be a number");
    }
    const int p = std::stoi(std::string(port));
    if (p < 1 || p > 65535) fail(context, "the port must be 1-65535");
  }
  out.origin += std::string(authority);
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  out.prefix = std::string(path);
  return out;
}

}  // namespace genscope::detail
