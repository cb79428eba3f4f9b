// What the OTLP trace and metrics encoders share (private to src/otlp/): the field numbers of
// the common messages (opentelemetry-proto's common/v1 and resource/v1, as the OTLP
// specification defines them), attribute writers and the run's Resource.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "genscope/run.hpp"
#include "otlp/protobuf_writer.hpp"

namespace genscope::detail::otlp {

// KeyValue { string key = 1; AnyValue value = 2; }
// AnyValue { oneof: string_value = 1; bool_value = 2; int_value = 3; double_value = 4; ... }
// Resource { repeated KeyValue attributes = 1; }
// InstrumentationScope { string name = 1; string version = 2; }
inline constexpr std::uint32_t kKeyValueKey = 1, kKeyValueValue = 2;
inline constexpr std::uint32_t kAnyString = 1, kAnyBool = 2, kAnyInt = 3, kAnyDouble = 4;
inline constexpr std::uint32_t kResourceAttributes = 1;
inline constexpr std::uint32_t kScopeName = 1, kScopeVersion = 2;

/// `text` with every byte that is not part of valid UTF-8 replaced by U+FFFD (protobuf
/// strings must be UTF-8; collectors refuse the request otherwise).
std::string utf8_or_replaced(std::string_view text);
/// A protobuf string field holding utf8_or_replaced(value).
void string_field(ProtobufWriter& w, std::uint32_t field, std::string_view value);

/// One KeyValue as repeated field `field` of the enclosing message.
void attribute(ProtobufWriter& w, std::uint32_t field, std::string_view key,
               std::string_view value);
void attribute(ProtobufWriter& w, std::uint32_t field, std::string_view key, const char* value);
void attribute_int(ProtobufWriter& w, std::uint32_t field, std::string_view key,
                   std::int64_t value);
void attribute_bool(ProtobufWriter& w, std::uint32_t field, std::string_view key, bool value);
/// Not written when `value` is NaN or infinite (OTLP has no "unknown").
void attribute_double(ProtobufWriter& w, std::uint32_t field, std::string_view key, double value);

/// The run's Resource (service, host, run, pipeline, labels, GPUs, ranks) as field `field`.
void resource(ProtobufWriter& w, std::uint32_t field, const Run& run,
              std::string_view service_name);
/// The InstrumentationScope "genscope" with the run's genscope version, as field `field`.
void scope(ProtobufWriter& w, std::uint32_t field, const Run& run);

/// The run's start and end on the Unix clock, in nanoseconds.
std::uint64_t run_start_ns(const Run& run) noexcept;
std::uint64_t run_end_ns(const Run& run) noexcept;

/// 16 raw bytes of the run's trace id / 8 raw bytes of a step's span id (-1: the run).
std::string trace_id(const Run& run);
std::string span_id(const Run& run, int step_id);

}  // namespace genscope::detail::otlp
