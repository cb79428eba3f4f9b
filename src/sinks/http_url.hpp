// HttpUrl: an http(s) URL as the HTTP client (cpp-httplib) takes it, checked with named errors.
// Shared by the Pushgateway push and the OTLP export (private to src/).
#pragma once

#include <string>
#include <string_view>

namespace genscope::detail {

struct HttpUrl {
  std::string origin;  ///< scheme://host[:port], as httplib::Client takes it.
  std::string prefix;  ///< The path, without a trailing '/' (empty for none).
};

/// Parses http(s)://HOST[:PORT][/PATH] (no user info, query or fragment). Throws
/// genscope::Error(`error_name`, "<what> '<url>': <why> (expected <expected>)").
HttpUrl parse_http_url(std::string_view url, const char* error_name, std::string_view what,
                       std::string_view expected);

}  // namespace genscope::detail
