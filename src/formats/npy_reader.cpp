// read_npy / parse_npy: magic, version, header length, header dict, descr, data size,
// checked in that order; big-endian data is byte-swapped into an owned buffer.
#include <algorithm>
#include <bit>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/mapped_file.hpp"
#include "formats/npy_header.hpp"
#include "formats/utf8.hpp"
#include "genscope/npy.hpp"

static_assert(std::endian::native == std::endian::little, "genscope assumes a little-endian host");

namespace genscope {

struct NpyArray::Impl {
  detail::MappedFile mapping;
  std::vector<std::byte> owned;
  std::span<const std::byte> data;
  std::string descr;
  DType dtype = DType::kU8;
  std::vector<std::int64_t> shape;
  bool fortran_order = false;
  int version = 1;
};

namespace detail {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicBytes = 6;

std::uint64_t read_le(const std::byte* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

// Reverses the bytes of each `elem`-byte element of `in` into `out` (same size). The
// fixed-width loops compile to vector shuffles.
template <typename U, U (*kSwap)(U)>
void swap_words(std::span<const std::byte> in, std::span<std::byte> out) {
  for (std::size_t off = 0; off < in.size(); off += sizeof(U)) {
    U v;
    std::memcpy(&v, in.data() + off, sizeof v);
    v = kSwap(v);
    std::memcpy(out.data() + off, &v, sizeof v);
  }
}
std::uint16_t bswap16(std::uint16_t v) { return __builtin_bswap16(v); }
std::uint32_t bswap32(std::uint32_t v) { return __builtin_bswap32(v); }
std::uint64_t bswap64(std::uint64_t v) { return __builtin_bswap64(v); }

void byte_swap(std::span<const std::byte> in, std::span<std::byte> out, std::size_t elem) {
  switch (elem) {
    case 2:
      return swap_words<std::uint16_t, bswap16>(in, out);
    case 4:
      return swap_words<std::uint32_t, bswap32>(in, out);
    case 8:
      return swap_words<std::uint64_t, bswap64>(in, out);
    default:
      std::memcpy(out.data(), in.data(), in.size());  // 1-byte elements
  }
}

bool is_unsigned_int(DType d) {
  return d == DType::kU8 || d == DType::kU16 || d == DType::kU32 || d == DType::kU64;
}

}  // namespace

// Builds NpyArray values (a friend of NpyArray, so it can name NpyArray::Impl).
struct NpyArrayAccess {
  using Impl = NpyArray::Impl;
  static void parse_into(Impl& impl, std::span<const std::byte> bytes,
                         std::optional<DType> stored_dtype, bool copy);
  static NpyArray read(const std::filesystem::path& path);
  static NpyArray parse(std::span<const std::byte> bytes, std::optional<DType> stored_dtype);
};

// Fills `impl` from `bytes`; `copy` forces the data into an owned buffer.
void NpyArrayAccess::parse_into(Impl& impl, std::span<const std::byte> bytes,
                                std::optional<DType> stored_dtype, bool copy) {
  const std::size_t size = bytes.size();
  const std::size_t magic_len = std::min(size, kMagicBytes);
  if (size == 0 || std::memcmp(bytes.data(), kMagic, magic_len) != 0) {
    throw Error("NpyBadMagic", "file does not start with \\x93NUMPY");
  }
  if (size < kMagicBytes + 2) {
    throw Error("NpyTruncated",
                "file ends inside the magic/version (" + std::to_string(size) + " bytes)");
  }
  const int major = std::to_integer<int>(bytes[6]);
  const int minor = std::to_integer<int>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0) {
    throw Error("NpyUnsupportedVersion", "format version " + std::to_string(major) + "." +
                                             std::to_string(minor) + " (supported: 1.0, 2.0, 3.0)");
  }
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (size < 8 + len_bytes) throw Error("NpyTruncated", "file ends inside the header length");
  const std::uint64_t header_len = read_le(bytes.data() + 8, static_cast<int>(len_bytes));
  const std::uint64_t data_start = 8 + len_bytes + header_len;
  if (data_start > size) {
    throw Error("NpyTruncated", "header of " + std::to_string(header_len) +
                                    " bytes runs past the end of the " + std::to_string(size) +
                                    "-byte file");
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8 + len_bytes,
                              header_len);
  if (major == 3) {
    if (auto bad = find_invalid_utf8(text)) {
      throw Error("NpyHeaderInvalid", "v3 header is not valid UTF-8 at file offset " +
                                          std::to_string(8 + len_bytes + *bad));
    }
  }
  NpyHeader header = parse_npy_header(text);
  const std::optional<NpyDescr> descr = parse_npy_descr(header.descr);
  if (!descr) throw Error("NpyUnknownDescr", "unsupported descr '" + header.descr + "'");
  DType dtype = descr->dtype;
  if (stored_dtype && *stored_dtype != dtype) {
    if (!is_unsigned_int(dtype) || dtype_size(*stored_dtype) != dtype_size(dtype)) {
      throw Error("NpySidecarInvalid", "stored dtype " + std::string(dtype_name(*stored_dtype)) +
                                           " cannot reinterpret descr '" + header.descr + "'");
    }
    dtype = *stored_dtype;
  }
  const std::size_t elem = dtype_size(dtype);
  std::uint64_t numel = 1;
  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  const bool any_zero =
      std::find(header.shape.begin(), header.shape.end(), 0) != header.shape.end();
  if (any_zero) numel = 0;
  for (std::int64_t d : header.shape) {
    if (any_zero) break;
    if (numel > kLimit / static_cast<std::uint64_t>(d)) {
      throw Error("NpyHeaderInvalid", "shape overflows");
    }
    numel *= static_cast<std::uint64_t>(d);
  }
  if (numel > kLimit / elem) throw Error("NpyHeaderInvalid", "shape x element size overflows");
  const std::uint64_t nbytes = numel * elem;
  const std::uint64_t available = size - data_start;
  if (available < nbytes) {
    throw Error("NpyTruncated", "data needs " + std::to_string(nbytes) + " bytes at file offset " +
                                    std::to_string(data_start) + ", file has " +
                                    std::to_string(available));
  }
  if (available > nbytes) {
    throw Error("NpyTrailingBytes", std::to_string(available - nbytes) +
                                        " bytes after the data, at file offset " +
                                        std::to_string(data_start + nbytes));
  }

  std::span<const std::byte> data = bytes.subspan(data_start, nbytes);
  if (descr->big_endian) {
    impl.owned.resize(nbytes);
    byte_swap(data, impl.owned, elem);
    impl.data = impl.owned;
  } else if (copy) {
    impl.owned.assign(data.begin(), data.end());
    impl.data = impl.owned;
  } else {
    impl.data = data;
  }
  impl.descr = std::move(header.descr);
  impl.dtype = dtype;
  impl.shape = std::move(header.shape);
  impl.fortran_order = header.fortran_order;
  impl.version = major;
}

namespace {

std::optional<DType> read_sidecar(const std::filesystem::path& sidecar) {
  std::error_code ec;
  if (!std::filesystem::exists(sidecar, ec)) return std::nullopt;
  std::ifstream in(sidecar, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("dtype") || !j["dtype"].is_string()) {
    throw Error("NpySidecarInvalid",
                "'" + sidecar.string() + "' is not a JSON object with a string \"dtype\"");
  }
  const std::string name = j["dtype"].get<std::string>();
  const std::optional<DType> dtype = parse_dtype(name);
  if (!dtype) {
    throw Error("NpySidecarInvalid", "'" + sidecar.string() + "': unknown dtype '" + name + "'");
  }
  return dtype;
}

}  // namespace

NpyArray NpyArrayAccess::read(const std::filesystem::path& path) {
  auto impl = std::make_unique<Impl>();
  impl->mapping = MappedFile::open(path);
  try {
    const std::optional<DType> stored = read_sidecar(npy_sidecar_path(path));
    parse_into(*impl, impl->mapping.bytes(), stored, /*copy=*/false);
  } catch (const Error& e) {
    throw Error(e.name(), path.string() + ": " + e.what());
  }
  if (!impl->owned.empty()) impl->mapping = MappedFile();  // byte-swapped copy owns the data
  return NpyArray(std::move(impl));
}

NpyArray NpyArrayAccess::parse(std::span<const std::byte> bytes,
                               std::optional<DType> stored_dtype) {
  auto impl = std::make_unique<Impl>();
  parse_into(*impl, bytes, stored_dtype, /*copy=*/true);
  return NpyArray(std::move(impl));
}

}  // namespace detail

NpyArray read_npy(const std::filesystem::path& path) { return detail::NpyArrayAccess::read(path); }

NpyArray parse_npy(std::span<const std::byte> bytes, std::optional<DType> stored_dtype) {
  return detail::NpyArrayAccess::parse(bytes, stored_dtype);
}

std::filesystem::path npy_sidecar_path(const std::filesystem::path& path) {
  std::filesystem::path out = path;
  out += ".dtype.json";
  return out;
}

NpyArray::NpyArray(std::unique_ptr<Impl> impl) noexcept : impl_(std::move(impl)) {}
NpyArray::NpyArray(NpyArray&&) noexcept = default;
NpyArray& NpyArray::operator=(NpyArray&&) noexcept = default;
NpyArray::~NpyArray() = default;

TensorView NpyArray::view() const {
  TensorView v;
  v.data = impl_->data.data();
  v.shape = impl_->shape;
  v.dtype = impl_->dtype;
  v.device = "cpu";
  if (impl_->fortran_order && impl_->shape.size() > 1) {
    v.strides.resize(impl_->shape.size());
    std::int64_t stride = 1;
    for (std::size_t i = 0; i < impl_->shape.size(); ++i) {
      v.strides[i] = stride;
      stride *= impl_->shape[i];
    }
  }
  return v;
}

DType NpyArray::dtype() const noexcept { return impl_->dtype; }
const std::vector<std::int64_t>& NpyArray::shape() const noexcept { return impl_->shape; }
bool NpyArray::fortran_order() const noexcept { return impl_->fortran_order; }
int NpyArray::version() const noexcept { return impl_->version; }
const std::string& NpyArray::descr() const noexcept { return impl_->descr; }
std::span<const std::byte> NpyArray::bytes() const noexcept { return impl_->data; }

}  // namespace genscope
