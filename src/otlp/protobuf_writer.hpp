// ProtobufWriter: the protocol buffers wire format (protobuf.dev, "Encoding"), written by hand
// for the OTLP messages (src/otlp/): varints, fixed64/fixed32, doubles, length-delimited
// strings, bytes and nested messages. No schema: the callers name the field numbers.
//
//   ProtobufWriter w;
//   w.string(1, "key");
//   w.message(2, [&](ProtobufWriter& v) { v.double_(4, 1.5); });
//   std::string bytes = w.take();
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace genscope::detail {

class ProtobufWriter {
 public:
  /// Wire types (protobuf.dev, "Encoding", "Message Structure").
  enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5 };

  /// int32/int64/uint64/bool/enum field (negative values take 10 bytes, as int64 does).
  void varint(std::uint32_t field, std::uint64_t value);
  void int64(std::uint32_t field, std::int64_t value) {
    varint(field, static_cast<std::uint64_t>(value));
  }
  void boolean(std::uint32_t field, bool value) { varint(field, value ? 1 : 0); }
  void fixed64(std::uint32_t field, std::uint64_t value);
  void fixed32(std::uint32_t field, std::uint32_t value);
  void double_(std::uint32_t field, double value);
  /// string or bytes field.
  void bytes(std::uint32_t field, std::string_view value);
  /// A packed repeated fixed64 field (no field at all when empty).
  void packed_fixed64(std::uint32_t field, std::span<const std::uint64_t> values);
  /// A packed repeated double field (no field at all when empty).
  void packed_double(std::uint32_t field, std::span<const double> values);
  /// A nested message: `fill` writes its fields into a writer whose bytes become the field.
  template <class F>
  void message(std::uint32_t field, F&& fill) {
    const std::size_t mark = begin_message(field);
    fill(*this);
    end_message(mark);
  }

  const std::string& data() const noexcept { return out_; }
  std::string take() noexcept { return std::move(out_); }

 private:
  void tag(std::uint32_t field, WireType type);
  void raw_varint(std::uint64_t value);
  // A nested message is written in place after a reserved 5-byte length, then the length
  // is written at the mark and the body moved left over the unused bytes.
  std::size_t begin_message(std::uint32_t field);
  void end_message(std::size_t mark);

  std::string out_;
};

}  // namespace genscope::detail
