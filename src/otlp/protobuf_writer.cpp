// The protobuf wire encoder (see protobuf_writer.hpp).
#include "otlp/protobuf_writer.hpp"

#include <bit>
#include <cstring>

#include "genscope/error.hpp"

namespace genscope::detail {

namespace {
constexpr std::size_t kLengthReserve = 5;  // a varint of up to 2^35 - 1

std::size_t varint_size(std::uint64_t value) noexcept {
  std::size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}
}  // namespace

void ProtobufWriter::raw_varint(std::uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtobufWriter::tag(std::uint32_t field, WireType type) {
  raw_varint((static_cast<std::uint64_t>(field) << 3) | type);
}

void ProtobufWriter::varint(std::uint32_t field, std::uint64_t value) {
  tag(field, kVarint);
  raw_varint(value);
}

void ProtobufWriter::fixed64(std::uint32_t field, std::uint64_t value) {
  tag(field, kFixed64);
  for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void ProtobufWriter::fixed32(std::uint32_t field, std::uint32_t value) {
  tag(field, kFixed32);
  for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void ProtobufWriter::double_(std::uint32_t field, double value) {
  fixed64(field, std::bit_cast<std::uint64_t>(value));
}

void ProtobufWriter::bytes(std::uint32_t field, std::string_view value) {
  tag(field, kLen);
  raw_varint(value.size());
  out_.append(value);
}

void ProtobufWriter::packed_fixed64(std::uint32_t field, std::span<const std::uint64_t> values) {
  if (values.empty()) return;
  tag(field, kLen);
  raw_varint(values.size() * 8);
  for (std::uint64_t v : values) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
}

void ProtobufWriter::packed_double(std::uint32_t field, std::span<const double> values) {
  if (values.empty()) return;
  tag(field, kLen);
  raw_varint(values.size() * 8);
  for (double d : values) {
    const std::uint64_t v = std::bit_cast<std::uint64_t>(d);
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }
}

std::size_t ProtobufWriter::begin_message(std::uint32_t field) {
  tag(field, kLen);
  out_.append(kLengthReserve, '\0');
  return out_.size();
}

void ProtobufWriter::end_message(std::size_t mark) {
  const std::size_t length = out_.size() - mark;
  if (length >= (std::uint64_t{1} << 35)) {
    throw Error("OtlpMessageTooLarge", "an OTLP message part exceeds 32 GiB");
  }
  const std::size_t used = varint_size(length);
  char* base = out_.data() + mark - kLengthReserve;
  std::uint64_t v = length;
  for (std::size_t i = 0; i < used; ++i) {
    base[i] = static_cast<char>((v & 0x7F) | (i + 1 < used ? 0x80 : 0));
    v >>= 7;
  }
  if (used < kLengthReserve) {
    std::memmove(base + used, out_.data() + mark, length);
    out_.resize(out_.size() - (kLengthReserve - used));
  }
}

}  // namespace genscope::detail
