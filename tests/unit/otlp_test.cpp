// The OTLP encoder and delivery rules (src/otlp/): the protobuf wire encoding byte for byte,
// the trace request read back with a small test-only wire decoder (span tree, ids, status),
// the OTEL_EXPORTER_OTLP_* settings and a dead collector's bounded failure. The content as a
// real collector reads it is checked by tests/cli/otlp_collector.sh.
#include "genscope/otlp.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "genscope/error.hpp"
#include "otlp/otlp_delivery.hpp"
#include "otlp/protobuf_writer.hpp"

namespace {

using genscope::detail::ProtobufWriter;

// A wire-format field as read back (test-only decoder).
struct Field {
  std::uint32_t number = 0;
  std::uint32_t wire = 0;
  std::uint64_t value = 0;  // varint, fixed64, fixed32
  std::string bytes;        // length-delimited
};

std::vector<Field> decode(std::string_view data) {
  std::vector<Field> out;
  std::size_t i = 0;
  auto varint = [&]() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (i >= data.size()) throw std::runtime_error("truncated varint");
      const auto b = static_cast<unsigned char>(data[i++]);
      v |= std::uint64_t(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    throw std::runtime_error("varint too long");
  };
  while (i < data.size()) {
    const std::uint64_t tag = varint();
    Field f;
    f.number = static_cast<std::uint32_t>(tag >> 3);
    f.wire = static_cast<std::uint32_t>(tag & 7);
    if (f.wire == 0) {
      f.value = varint();
    } else if (f.wire == 1 || f.wire == 5) {
      const int n = f.wire == 1 ? 8 : 4;
      if (i + n > data.size()) throw std::runtime_error("truncated fixed");
      for (int k = 0; k < n; ++k)
        f.value |= std::uint64_t(static_cast<unsigned char>(data[i + k])) << (8 * k);
      i += n;
    } else if (f.wire == 2) {
      const std::uint64_t n = varint();
      if (i + n > data.size()) throw std::runtime_error("truncated bytes");
      f.bytes = std::string(data.substr(i, n));
      i += n;
    } else {
      throw std::runtime_error("bad wire type");
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<Field> all(const std::vector<Field>& fields, std::uint32_t number) {
  std::vector<Field> out;
  for (const Field& f : fields) {
    if (f.number == number) out.push_back(f);
  }
  return out;
}

const Field* first(const std::vector<Field>& fields, std::uint32_t number) {
  for (const Field& f : fields) {
    if (f.number == number) return &f;
  }
  return nullptr;
}

std::string hex(std::string_view bytes) {
  static constexpr char k[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += k[c >> 4];
    out += k[c & 15];
  }
  return out;
}

// The string attributes of a message whose KeyValues are field `number`.
std::map<std::string, std::string> string_attributes(const std::vector<Field>& fields,
                                                     std::uint32_t number) {
  std::map<std::string, std::string> out;
  for (const Field& kv : all(fields, number)) {
    const auto parts = decode(kv.bytes);
    const Field* key = first(parts, 1);
    const Field* value = first(parts, 2);
    if (key == nullptr || value == nullptr) continue;
    const auto any = decode(value->bytes);
    if (const Field* s = first(any, 1)) out[key->bytes] = s->bytes;
    if (const Field* n = first(any, 3))
      out[key->bytes] = std::to_string(static_cast<std::int64_t>(n->value));
  }
  return out;
}

TEST(ProtobufWriter, WritesTheWireFormat) {
  ProtobufWriter w;
  w.varint(1, 150);  // protobuf.dev "Encoding": 08 96 01
  w.bytes(2, "testing");
  w.fixed64(7, 0x0102030405060708ull);
  w.int64(3, -1);  // ten bytes
  EXPECT_EQ(hex(w.data()),
            "089601"
            "120774657374696e67"
            "390807060504030201"
            "18ffffffffffffffffff01");
}

TEST(ProtobufWriter, NestedMessagesTakeTheShortestLength) {
  for (std::size_t size : {0u, 1u, 127u, 128u, 20000u, 3000000u}) {
    ProtobufWriter w;
    w.message(5, [&](ProtobufWriter& inner) {
      if (size > 0) inner.bytes(1, std::string(size - std::min<std::size_t>(size, 4), 'x'));
    });
    const auto fields = decode(w.data());
    ASSERT_EQ(fields.size(), 1u) << size;
    EXPECT_EQ(fields[0].number, 5u);
    if (size > 0) {
      const auto inner = decode(fields[0].bytes);
      ASSERT_EQ(inner.size(), 1u);
      EXPECT_EQ(inner[0].bytes.size(), size - std::min<std::size_t>(size, 4));
    } else {
      EXPECT_TRUE(fields[0].bytes.empty());
    }
  }
}

genscope::Run nested_run() {
  genscope::Run run;
  run.id = "0123456789abcdef0123456789abcdef";
  run.start_unix_ns = 1'800'000'000'000'000'000;
  run.duration_ns = 5'000'000;
  run.host.hostname = "gpu-host-1";
  run.pipeline.name = "t2i";
  run.labels["team"] = "imaging";
  genscope::StepRecord load{.id = 0, .parent_id = -1, .name = "load"};
  load.duration_ns = 1000;
  genscope::StepRecord unet{.id = 1, .parent_id = 0, .name = "load unet\xff"};  // invalid UTF-8
  unet.start_offset_ns = 10;
  genscope::StepRecord sample{.id = 2, .parent_id = -1, .name = "sampling"};
  sample.kind = genscope::StepKind::kSampling;
  sample.status = genscope::StepStatus::kFailed;
  sample.error_type = "OutOfMemoryError";
  sample.error_message = "CUDA out of memory";
  sample.iteration_ns = {100, 200, 300};
  sample.start_offset_ns = 0;
  sample.duration_ns = 1000;
  run.steps = {load, unet, sample};
  return run;
}

TEST(OtlpTraces, OneSpanPerStepNestedUnderTheRunsRootSpan) {
  const genscope::Run run = nested_run();
  const auto request = decode(genscope::encode_otlp_traces(run));
  const auto resource_spans = decode(first(request, 1)->bytes);
  const auto resource = string_attributes(decode(first(resource_spans, 1)->bytes), 1);
  EXPECT_EQ(resource.at("service.name"), "genscope");
  EXPECT_EQ(resource.at("host.name"), "gpu-host-1");
  EXPECT_EQ(resource.at("genscope.label.team"), "imaging");
  const auto scope_spans = decode(first(resource_spans, 2)->bytes);
  const auto spans = all(scope_spans, 2);
  ASSERT_EQ(spans.size(), 4u);  // root + 3 steps
  std::map<std::string, std::vector<Field>> by_name;
  for (const Field& s : spans) {
    auto fields = decode(s.bytes);
    EXPECT_EQ(hex(first(fields, 1)->bytes), run.id);
    by_name[first(fields, 5)->bytes] = fields;
  }
  ASSERT_TRUE(by_name.count("t2i"));
  ASSERT_TRUE(by_name.count("load unet\xEF\xBF\xBD"));  // replaced, not refused
  const auto& root = by_name["t2i"];
  EXPECT_EQ(first(root, 4), nullptr);  // no parent
  EXPECT_EQ(first(root, 7)->value, 1'800'000'000'000'000'000ull);
  EXPECT_EQ(first(root, 8)->value, 1'800'000'000'005'000'000ull);
  const std::string root_id = first(root, 2)->bytes;
  EXPECT_EQ(hex(root_id), genscope::otlp_span_id_hex(run, -1));
  EXPECT_EQ(first(by_name["load"], 4)->bytes, root_id);
  EXPECT_EQ(first(by_name["load unet\xEF\xBF\xBD"], 4)->bytes, first(by_name["load"], 2)->bytes);
  EXPECT_EQ(first(by_name["load unet\xEF\xBF\xBD"], 7)->value, 1'800'000'000'000'000'010ull);
  const auto& sampling = by_name["sampling"];
  EXPECT_EQ(first(sampling, 4)->bytes, root_id);
  const auto status = decode(first(sampling, 15)->bytes);
  EXPECT_EQ(first(status, 3)->value, 2u);  // ERROR
  EXPECT_EQ(first(status, 2)->bytes, "OutOfMemoryError: CUDA out of memory");
  const auto events = all(sampling, 11);
  ASSERT_EQ(events.size(), 3u);
  const auto third = decode(events[2].bytes);
  EXPECT_EQ(first(third, 1)->value, 1'800'000'000'000'000'600ull);  // start + 100 + 200 + 300
  EXPECT_EQ(string_attributes(third, 3).at("genscope.iteration.duration_ns"), "300");
  const auto attributes = string_attributes(sampling, 9);
  EXPECT_EQ(attributes.at("genscope.step.kind"), "sampling");
  EXPECT_EQ(attributes.at("genscope.step.status"), "failed");
  EXPECT_EQ(attributes.at("genscope.iterations.count"), "3");
}

TEST(OtlpTraces, ARanksRunCarriesItsDistributedIdentity) {
  genscope::Run run = nested_run();
  auto resource_of = [](const genscope::Run& r) {
    const auto request = decode(genscope::encode_otlp_traces(r));
    return string_attributes(decode(first(decode(first(request, 1)->bytes), 1)->bytes), 1);
  };
  EXPECT_EQ(resource_of(run).count("genscope.rank"), 0u);  // one process: no rank
  genscope::DistributedInfo d;
  d.rank = 1;
  d.world_size = 2;
  d.local_rank = 1;
  d.group = "job-42";
  run.distributed = d;
  const auto resource = resource_of(run);
  EXPECT_EQ(resource.at("genscope.distributed.role"), "rank");
  EXPECT_EQ(resource.at("genscope.rank"), "1");
  EXPECT_EQ(resource.at("genscope.world_size"), "2");
  EXPECT_EQ(resource.at("genscope.local_rank"), "1");
  EXPECT_EQ(resource.at("genscope.group"), "job-42");
  EXPECT_EQ(resource.count("genscope.node_rank"), 0u);  // unknown: left out
}

TEST(OtlpTraces, AnIdThatIsNotHexGetsAStableNonZeroTraceId) {
  genscope::Run run;
  run.id = "x";
  const std::string a = genscope::otlp_trace_id_hex(run);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, genscope::otlp_trace_id_hex(run));
  EXPECT_NE(a, std::string(32, '0'));
  run.id = std::string(32, '0');  // all zeros is invalid in OTLP
  EXPECT_NE(genscope::otlp_trace_id_hex(run), std::string(32, '0'));
}

TEST(OtlpSettings, HeadersRetryAfterAndEndpoints) {
  using genscope::detail::otlp::parse_otlp_headers;
  using genscope::detail::otlp::parse_retry_after;
  const auto h = parse_otlp_headers("api-key=abc%3D, x-team = imaging%20lab,,");
  EXPECT_EQ(h.at("api-key"), "abc=");
  EXPECT_EQ(h.at("x-team"), "imaging lab");
  EXPECT_THROW(parse_otlp_headers("novalue"), genscope::Error);
  EXPECT_EQ(parse_retry_after(" 3 ").count(), 3000);
  EXPECT_EQ(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT").count(), -1);

  ::unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
  ::unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  ::unsetenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
  const auto t = genscope::resolve_otlp_targets({.endpoint = "http://collector:4318/"});
  EXPECT_EQ(t.traces_url, "http://collector:4318/v1/traces");
  EXPECT_EQ(t.metrics_url, "http://collector:4318/v1/metrics");
  EXPECT_THROW(genscope::resolve_otlp_targets({.enabled = true}), genscope::Error);  // none set
  ::setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://otel.example:4318/base", 1);
  ::setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://tempo:4318/v1/traces", 1);
  const auto e = genscope::resolve_otlp_targets({.enabled = true});
  EXPECT_EQ(e.traces_url, "http://tempo:4318/v1/traces");  // signal-specific: as it is
  EXPECT_EQ(e.metrics_url, "https://otel.example:4318/base/v1/metrics");
  ::unsetenv("OTEL_EXPORTER_OTLP_ENDPOINT");
  ::unsetenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
  try {
    genscope::resolve_otlp_targets({.endpoint = "udp://collector:4318"});
    FAIL() << "no error";
  } catch (const genscope::Error& err) {
    EXPECT_EQ(err.name(), "InvalidOtlpEndpoint");
  }
}

TEST(OtlpExporter, ADeadCollectorIsABoundedFailureNeverAnException) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);  // nothing listens on that port now
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  genscope::OtlpExporter exporter({.endpoint = url,
                                   .retry_deadline = std::chrono::milliseconds(600),
                                   .wait = std::chrono::milliseconds(3000)});
  const auto start = std::chrono::steady_clock::now();
  const std::string problem = exporter.send(nested_run());
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_NE(problem.find("run not exported"), std::string::npos) << problem;
  EXPECT_NE(problem.find("failed 1"), std::string::npos) << problem;
  EXPECT_LT(took, std::chrono::milliseconds(3000));
  EXPECT_EQ(exporter.counts().failed, 1u);
}

}  // namespace
