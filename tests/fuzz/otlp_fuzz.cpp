// libFuzzer target: the OTLP export's inputs. Arbitrary bytes as OTEL_EXPORTER_OTLP_HEADERS
// (parse or throw genscope::Error "InvalidOtlpHeaders") and as a Retry-After value (never
// throws); as a run document that parses, the trace and metrics requests must be well-formed
// protobuf: every length-delimited field of the request and of its ResourceSpans /
// ResourceMetrics lies inside its message (a test-only wire walk).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "genscope/error.hpp"
#include "genscope/otlp.hpp"
#include "genscope/run_json.hpp"
#include "otlp/otlp_delivery.hpp"

namespace {

// Walks the fields of one message; aborts when one overruns it. Calls `nested` with the bytes
// of each length-delimited field numbered `number`.
template <class F>
void walk(std::string_view m, std::uint32_t number, F&& nested) {
  std::size_t i = 0;
  auto varint = [&]() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= m.size()) std::abort();
      const auto b = static_cast<unsigned char>(m[i++]);
      v |= std::uint64_t(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    std::abort();
  };
  while (i < m.size()) {
    const std::uint64_t tag = varint();
    switch (tag & 7) {
      case 0:
        varint();
        break;
      case 1:
        i += 8;
        break;
      case 5:
        i += 4;
        break;
      case 2: {
        const std::uint64_t n = varint();
        if (n > m.size() - i) std::abort();
        if ((tag >> 3) == number) nested(m.substr(i, n));
        i += n;
        break;
      }
      default:
        std::abort();
    }
    if (i > m.size()) std::abort();
  }
}

void check_request(const std::string& bytes) {
  walk(bytes, 1, [](std::string_view resource) {
    walk(resource, 2, [](std::string_view scope) { walk(scope, 2, [](std::string_view) {}); });
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    (void)detail::otlp::parse_otlp_headers(text);
  } catch (const Error& e) {
    if (e.name() != "InvalidOtlpHeaders") std::abort();
  }
  (void)detail::otlp::parse_retry_after(text);
  const auto document = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return 0;
  try {
    const Run run = run_from_json(document);
    check_request(encode_otlp_traces(run));
    check_request(encode_otlp_metrics(run));
  } catch (const Error&) {
    // Not a run document: named, fine.
  }
  return 0;
}
