// Attributes, ids and the Resource of the OTLP encoders (see otlp_common.hpp).
#include "otlp/otlp_common.hpp"

#include <cmath>

#include "formats/utf8.hpp"
#include "tensor/hash.hpp"

namespace genscope::detail::otlp {

std::string utf8_or_replaced(std::string_view text) {
  std::optional<std::size_t> bad = find_invalid_utf8(text);
  if (!bad) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  while (bad) {
    out.append(text.substr(0, *bad));
    out.append("\xEF\xBF\xBD");
    text.remove_prefix(*bad + 1);
    bad = find_invalid_utf8(text);
  }
  out.append(text);
  return out;
}

void string_field(ProtobufWriter& w, std::uint32_t field, std::string_view value) {
  if (!find_invalid_utf8(value)) {
    w.bytes(field, value);
  } else {
    w.bytes(field, utf8_or_replaced(value));
  }
}

void attribute(ProtobufWriter& w, std::uint32_t field, std::string_view key,
               std::string_view value) {
  w.message(field, [&](ProtobufWriter& kv) {
    string_field(kv, kKeyValueKey, key);
    kv.message(kKeyValueValue, [&](ProtobufWriter& any) { string_field(any, kAnyString, value); });
  });
}

void attribute(ProtobufWriter& w, std::uint32_t field, std::string_view key, const char* value) {
  attribute(w, field, key, std::string_view(value));
}

void attribute_int(ProtobufWriter& w, std::uint32_t field, std::string_view key,
                   std::int64_t value) {
  w.message(field, [&](ProtobufWriter& kv) {
    string_field(kv, kKeyValueKey, key);
    kv.message(kKeyValueValue, [&](ProtobufWriter& any) { any.int64(kAnyInt, value); });
  });
}

void attribute_bool(ProtobufWriter& w, std::uint32_t field, std::string_view key, bool value) {
  w.message(field, [&](ProtobufWriter& kv) {
    string_field(kv, kKeyValueKey, key);
    kv.message(kKeyValueValue, [&](ProtobufWriter& any) { any.boolean(kAnyBool, value); });
  });
}

void attribute_double(ProtobufWriter& w, std::uint32_t field, std::string_view key, double value) {
  if (!std::isfinite(value)) return;
  w.message(field, [&](ProtobufWriter& kv) {
    string_field(kv, kKeyValueKey, key);
    kv.message(kKeyValueValue, [&](ProtobufWriter& any) { any.double_(kAnyDouble, value); });
  });
}

namespace {

// The one place where a run's distributed identity (Run::distributed, distributed.hpp) becomes
// resource attributes, so that a collector tells the ranks of one generation apart.
void rank_attributes(ProtobufWriter& w, std::uint32_t field, const Run& run) {
  if (!run.distributed) return;
  const DistributedInfo& d = *run.distributed;
  attribute(w, field, "genscope.distributed.role", d.role);
  if (d.rank >= 0) attribute_int(w, field, "genscope.rank", d.rank);
  if (d.world_size > 0) attribute_int(w, field, "genscope.world_size", d.world_size);
  if (d.local_rank >= 0) attribute_int(w, field, "genscope.local_rank", d.local_rank);
  if (d.node_rank >= 0) attribute_int(w, field, "genscope.node_rank", d.node_rank);
  if (!d.group.empty()) attribute(w, field, "genscope.group", d.group);
  if (d.pid > 0) attribute_int(w, field, "process.pid", d.pid);
}

}  // namespace

void resource(ProtobufWriter& w, std::uint32_t field, const Run& run,
              std::string_view service_name) {
  w.message(field, [&](ProtobufWriter& r) {
    constexpr std::uint32_t f = kResourceAttributes;
    attribute(r, f, "service.name", service_name);
    if (!run.genscope_version.empty()) attribute(r, f, "service.version", run.genscope_version);
    attribute(r, f, "service.instance.id", run.id);
    if (!run.host.hostname.empty()) attribute(r, f, "host.name", run.host.hostname);
    if (!run.host.cpu_model.empty()) attribute(r, f, "host.cpu.model.name", run.host.cpu_model);
    if (!run.host.os.empty()) attribute(r, f, "os.description", run.host.os);
    if (run.host.cpu_cores > 0) attribute_int(r, f, "genscope.host.cpu_cores", run.host.cpu_cores);
    attribute_double(r, f, "genscope.host.ram_bytes", run.host.ram_bytes);
    attribute(r, f, "genscope.run.id", run.id);
    if (!run.start_utc.empty()) attribute(r, f, "genscope.run.start_utc", run.start_utc);
    if (!run.pipeline.name.empty()) attribute(r, f, "genscope.pipeline.name", run.pipeline.name);
    if (!run.pipeline.model.empty()) attribute(r, f, "genscope.pipeline.model", run.pipeline.model);
    if (!run.pipeline.architecture.empty()) {
      attribute(r, f, "genscope.pipeline.architecture", run.pipeline.architecture);
    }
    for (const auto& [key, value] : run.pipeline.parameters) {
      attribute(r, f, "genscope.pipeline.parameter." + key, value);
    }
    for (const auto& [key, value] : run.labels) attribute(r, f, "genscope.label." + key, value);
    if (!run.gpus.empty()) {
      attribute_int(r, f, "genscope.gpu.count", static_cast<std::int64_t>(run.gpus.size()));
      attribute(r, f, "genscope.gpu.name", run.gpus.front().name);
      attribute_double(r, f, "genscope.gpu.total_bytes", run.gpus.front().total_bytes);
      if (!run.gpus.front().driver_version.empty()) {
        attribute(r, f, "genscope.gpu.driver_version", run.gpus.front().driver_version);
      }
    }
    rank_attributes(r, f, run);
  });
}

void scope(ProtobufWriter& w, std::uint32_t field, const Run& run) {
  w.message(field, [&](ProtobufWriter& s) {
    s.bytes(kScopeName, "genscope");
    if (!run.genscope_version.empty()) string_field(s, kScopeVersion, run.genscope_version);
  });
}

std::uint64_t run_start_ns(const Run& run) noexcept {
  return run.start_unix_ns > 0 ? static_cast<std::uint64_t>(run.start_unix_ns) : 0;
}

std::uint64_t run_end_ns(const Run& run) noexcept {
  return run_start_ns(run) + static_cast<std::uint64_t>(std::max<std::int64_t>(run.duration_ns, 0));
}

namespace {

int hex_digit(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 7; i >= 0; --i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

}  // namespace

std::string trace_id(const Run& run) {
  std::string out;
  if (run.id.size() == 32) {
    for (std::size_t i = 0; i < 32; i += 2) {
      const int hi = hex_digit(run.id[i]);
      const int lo = hex_digit(run.id[i + 1]);
      if (hi < 0 || lo < 0) {
        out.clear();
        break;
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
    }
  }
  if (out.size() != 16 || out.find_first_not_of('\0') == std::string::npos) {
    // Not a 128-bit hex id (an id written by hand, or all zeros: invalid in OTLP).
    out.clear();
    const std::string a = "genscope.trace:" + run.id;
    put_u64(out, xxh3_64(a.data(), a.size()));
    const std::string b = "genscope.trace2:" + run.id;
    put_u64(out, xxh3_64(b.data(), b.size()) | 1);  // never all zeros
  }
  return out;
}

std::string span_id(const Run& run, int step_id) {
  const std::string key = run.id + "/" + std::to_string(step_id);
  std::uint64_t v = xxh3_64(key.data(), key.size());
  if (v == 0) v = 1;  // an all-zero span id is invalid
  std::string out;
  put_u64(out, v);
  return out;
}

}  // namespace genscope::detail::otlp
