// SafetensorsFile: strict validation of a safetensors file, in a fixed order.
//
// Order (the first violation wins; within one check, the first tensor in header order, or
// in data-offset order for the offset checks):
//   HeaderLengthMissing, HeaderTooLarge, MetadataIncompleteBuffer, InvalidHeaderUtf8,
//   InvalidHeaderJson (syntax, top level not an object, entry not an object, unknown field),
//   DuplicateKey, UnknownDtype, InvalidShape, SizeOverflow, InvalidOffset (missing, not two
//   integers, begin > end), InvalidOffset (not contiguous from 0), TensorSizeMismatch,
//   InvalidOffset (data past the end), TrailingBytes, InvalidMetadata.
#include <algorithm>
#include <cstring>
#include <functional>
#include <unordered_map>
#include <unordered_set>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "formats/mapped_file.hpp"
#include "formats/safetensors_header.hpp"
#include "formats/utf8.hpp"
#include "genscope/safetensors.hpp"

namespace genscope {

namespace {

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

std::string tick(const std::string& name) { return "'" + name + "'"; }

std::string offsets_text(const SafetensorsEntry& e) {
  return "[" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "]";
}

// numel * dtype_size with overflow checks; nullopt on overflow (limit: INT64_MAX bytes, so
// TensorView::nbytes() can represent it).
std::optional<std::uint64_t> checked_nbytes(const std::vector<std::int64_t>& shape,
                                            std::size_t elem) {
  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t n = 1;
  bool zero = false;
  for (std::int64_t d : shape) {
    if (d == 0) zero = true;
  }
  if (zero) return 0;
  for (std::int64_t d : shape) {
    const auto u = static_cast<std::uint64_t>(d);
    if (n > kLimit / u) return std::nullopt;
    n *= u;
  }
  if (n > kLimit / elem) return std::nullopt;
  return n * elem;
}

}  // namespace

struct SafetensorsFile::Impl {
  detail::MappedFile mapping;  // empty when parsing a caller-owned buffer
  std::span<const std::byte> bytes;
  std::uint64_t header_size = 0;
  std::vector<SafetensorsEntry> entries;
  // Hashed, with string_view lookups: a base model has thousands of names to look up.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const noexcept {
      return std::hash<std::string_view>{}(s);
    }
  };
  std::unordered_map<std::string, std::size_t, NameHash, std::equal_to<>> index;
  std::map<std::string, std::string> metadata;

  const std::byte* data_section() const { return bytes.data() + 8 + header_size; }
  void validate();
};

void SafetensorsFile::Impl::validate() {
  const std::uint64_t file_size = bytes.size();
  if (file_size < 8) {
    throw Error("HeaderLengthMissing", "file is " + std::to_string(file_size) +
                                           " bytes, shorter than the 8-byte header length");
  }
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | std::to_integer<std::uint64_t>(bytes[i]);
  if (n > kMaxHeaderBytes) {
    throw Error("HeaderTooLarge", "header length " + std::to_string(n) + " exceeds the limit of " +
                                      std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > file_size - 8) {
    throw Error("MetadataIncompleteBuffer", "header length " + std::to_string(n) +
                                                " runs past the end of the " +
                                                std::to_string(file_size) + "-byte file");
  }
  header_size = n;
  const std::string_view json(reinterpret_cast<const char*>(bytes.data()) + 8, n);
  if (auto bad = detail::find_invalid_utf8(json)) {
    throw Error("InvalidHeaderUtf8",
                "header is not valid UTF-8 at file offset " + std::to_string(8 + *bad));
  }
  // Raw NUL is never valid JSON; rejecting it up front gives a clearer message.
  if (const std::size_t nul = json.find('\0'); nul != std::string_view::npos) {
    throw Error("InvalidHeaderJson",
                "header contains a NUL byte at file offset " + std::to_string(8 + nul));
  }
  detail::RawSafetensorsHeader raw = detail::parse_safetensors_header(json);
  if (!raw.json_ok) {
    throw Error("InvalidHeaderJson", "header is not valid JSON (header offset " +
                                         std::to_string(raw.json_error_offset) +
                                         "): " + raw.json_error);
  }
  if (!raw.top_is_object) throw Error("InvalidHeaderJson", "header is not a JSON object");
  for (const auto& r : raw.entries) {
    if (!r.is_object) {
      throw Error("InvalidHeaderJson", "entry " + tick(r.name) + " is not a JSON object");
    }
    if (!r.unknown_field.empty()) {
      throw Error("InvalidHeaderJson",
                  "entry " + tick(r.name) + " has unknown field " + tick(r.unknown_field));
    }
  }
  if (!raw.duplicate_key.empty()) {
    throw Error("DuplicateKey", "header key " + tick(raw.duplicate_key) + " appears twice");
  }
  {
    std::unordered_set<std::string_view> names;
    names.reserve(raw.entries.size());
    for (const auto& r : raw.entries) {
      if (!names.insert(r.name).second) {
        throw Error("DuplicateKey", "header key " + tick(r.name) + " appears twice");
      }
    }
  }

  std::vector<SafetensorsEntry> out(raw.entries.size());
  for (std::size_t i = 0; i < raw.entries.size(); ++i) {
    const auto& r = raw.entries[i];
    std::optional<DType> dtype;
    if (r.has_dtype && r.dtype_is_string) dtype = parse_dtype(r.dtype);
    if (!dtype) {
      throw Error("UnknownDtype", "tensor " + tick(r.name) +
                                      (!r.has_dtype         ? ": dtype missing"
                                       : !r.dtype_is_string ? ": dtype is not a string"
                                                            : ": unknown dtype " + tick(r.dtype)));
    }
    out[i].dtype = *dtype;
  }
  // Names and shapes move to the entries; the messages below name out[i].
  for (std::size_t i = 0; i < raw.entries.size(); ++i) out[i].name = std::move(raw.entries[i].name);
  for (std::size_t i = 0; i < raw.entries.size(); ++i) {
    const auto& r = raw.entries[i];
    if (!r.has_shape || !r.shape_ok) {
      throw Error("InvalidShape", "tensor " + tick(out[i].name) +
                                      (!r.has_shape ? ": shape missing"
                                                    : ": shape is not an array of integers "
                                                      "in [0, 2^63)"));
    }
  }
  std::vector<std::uint64_t> nbytes(raw.entries.size());
  for (std::size_t i = 0; i < raw.entries.size(); ++i) {
    auto size = checked_nbytes(raw.entries[i].shape, dtype_size(out[i].dtype));
    if (!size) {
      throw Error("SizeOverflow",
                  "tensor " + tick(out[i].name) + ": shape x dtype size overflows");
    }
    nbytes[i] = *size;
    out[i].shape = std::move(raw.entries[i].shape);
  }
  for (std::size_t i = 0; i < raw.entries.size(); ++i) {
    const auto& r = raw.entries[i];
    if (!r.has_offsets || !r.offsets_ok || r.offsets.size() != 2) {
      throw Error("InvalidOffset",
                  "tensor " + tick(out[i].name) +
                      (!r.has_offsets ? ": data_offsets missing"
                                      : ": data_offsets is not two unsigned integers"));
    }
    out[i].begin = r.offsets[0];
    out[i].end = r.offsets[1];
    if (out[i].begin > out[i].end) {
      throw Error("InvalidOffset", "tensor " + tick(out[i].name) + ": data_offsets " +
                                       offsets_text(out[i]) + " begin after end");
    }
  }

  std::vector<std::size_t> order(out.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::pair(out[a].begin, out[a].end) < std::pair(out[b].begin, out[b].end);
  });
  std::uint64_t expected = 0;
  for (std::size_t i : order) {
    if (out[i].begin != expected) {
      throw Error("InvalidOffset", "tensor " + tick(out[i].name) + ": data_offsets " +
                                       offsets_text(out[i]) +
                                       (out[i].begin > expected ? " leave a gap" : " overlap") +
                                       " (expected begin " + std::to_string(expected) + ")");
    }
    expected = out[i].end;
  }
  for (std::size_t i : order) {
    if (out[i].nbytes() != nbytes[i]) {
      throw Error("TensorSizeMismatch",
                  "tensor " + tick(out[i].name) + ": data_offsets " + offsets_text(out[i]) +
                      " span " + std::to_string(out[i].nbytes()) + " bytes, shape and dtype " +
                      std::string(dtype_name(out[i].dtype)) + " need " + std::to_string(nbytes[i]));
    }
  }
  const std::uint64_t data_size = file_size - 8 - header_size;
  if (expected > data_size) {
    const auto& last = out[order.back()];
    throw Error("InvalidOffset", "tensor " + tick(last.name) + ": data_offsets " +
                                     offsets_text(last) + " run past the end of the " +
                                     std::to_string(data_size) + "-byte data section");
  }
  if (expected < data_size) {
    throw Error("TrailingBytes", std::to_string(data_size - expected) +
                                     " bytes after the last tensor, at file offset " +
                                     std::to_string(8 + header_size + expected));
  }
  if (!raw.metadata_ok) throw Error("InvalidMetadata", raw.metadata_problem);

  entries.reserve(out.size());
  for (std::size_t i : order) entries.push_back(std::move(out[i]));
  index.reserve(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].name, i);
  metadata = std::move(raw.metadata);
}

SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->mapping = detail::MappedFile::open(path);
  impl->bytes = impl->mapping.bytes();
  try {
    impl->validate();
  } catch (const Error& e) {
    throw Error(e.name(), path.string() + ": " + e.what());
  }
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile SafetensorsFile::parse(std::span<const std::byte> bytes) {
  auto impl = std::make_unique<Impl>();
  impl->bytes = bytes;
  impl->validate();
  return SafetensorsFile(std::move(impl));
}

SafetensorsFile::SafetensorsFile(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

const std::vector<SafetensorsEntry>& SafetensorsFile::entries() const noexcept {
  return impl_->entries;
}

const SafetensorsEntry* SafetensorsFile::find(std::string_view name) const noexcept {
  auto it = impl_->index.find(name);
  return it == impl_->index.end() ? nullptr : &impl_->entries[it->second];
}

const std::map<std::string, std::string>& SafetensorsFile::metadata() const noexcept {
  return impl_->metadata;
}

std::span<const std::byte> SafetensorsFile::bytes(const SafetensorsEntry& entry) const noexcept {
  return {impl_->data_section() + entry.begin, entry.nbytes()};
}

TensorView SafetensorsFile::view(const SafetensorsEntry& entry) const {
  TensorView v;
  v.data = impl_->data_section() + entry.begin;
  v.shape = entry.shape;
  v.dtype = entry.dtype;
  v.device = "cpu";
  return v;
}

std::uint64_t SafetensorsFile::file_size() const noexcept { return impl_->bytes.size(); }
std::uint64_t SafetensorsFile::header_size() const noexcept { return impl_->header_size; }

}  // namespace genscope
