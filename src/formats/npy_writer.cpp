// write_npy: NumPy-compatible header (v1.0, or v2.0 past 65535 bytes), data 64-byte
// aligned, strided views gathered into C order, BF16/F8 with a dtype sidecar.
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "formats/atomic_file.hpp"
#include "formats/npy_header.hpp"
#include "formats/strided_copy.hpp"
#include "genscope/npy.hpp"

namespace genscope {

namespace {

constexpr std::size_t kAlignBytes = 64;

// The header dict exactly as numpy.lib.format writes it, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
std::string header_dict(const TensorView& view) {
  std::string h = "{'descr': '";
  h += detail::npy_descr(view.dtype);
  h += "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < view.shape.size(); ++i) {
    if (i > 0) h += ", ";
    h += std::to_string(view.shape[i]);
  }
  if (view.shape.size() == 1) h += ',';
  h += "), }";
  return h;
}

// Magic, version, length and padded header: the bytes before the data.
std::string preamble(const std::string& dict) {
  for (int major : {1, 2}) {
    const std::size_t len_bytes = major == 1 ? 2 : 4;
    const std::size_t fixed = 8 + len_bytes + dict.size() + 1;  // + '\n'
    const std::size_t padded = (fixed + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
    const std::size_t header_len = padded - 8 - len_bytes;
    if (major == 1 && header_len > 0xFFFF) continue;
    std::string out("\x93NUMPY", 6);
    out += static_cast<char>(major);
    out += '\0';
    for (std::size_t i = 0; i < len_bytes; ++i) {
      out += static_cast<char>((header_len >> (8 * i)) & 0xFF);
    }
    out += dict;
    out.append(padded - out.size() - 1, ' ');
    out += '\n';
    return out;
  }
  return {};  // unreachable: a v2 length field holds 4 GiB
}

}  // namespace

void write_npy(const std::filesystem::path& path, const TensorView& view) {
  for (std::int64_t d : view.shape) {
    if (d < 0) throw Error("InvalidShape", "negative dimension " + std::to_string(d));
  }
  detail::AtomicFile file(path);
  file.write(preamble(header_dict(view)));
  const auto nbytes = static_cast<std::size_t>(view.nbytes());
  if (view.is_contiguous()) {
    file.write(std::span<const std::byte>(static_cast<const std::byte*>(view.data), nbytes));
  } else {
    std::vector<std::byte> buffer(nbytes);
    detail::copy_to_contiguous(view, buffer);
    file.write(buffer);
  }
  const std::filesystem::path sidecar = npy_sidecar_path(path);
  if (detail::npy_needs_sidecar(view.dtype)) {
    const std::string json =
        nlohmann::json{{"dtype", std::string(dtype_name(view.dtype))}}.dump() + "\n";
    detail::write_file_atomically(sidecar,
                                  std::as_bytes(std::span<const char>(json.data(), json.size())));
  } else {
    std::error_code ec;
    std::filesystem::remove(sidecar, ec);  // a stale sidecar would mislabel the new data
  }
  file.commit();
}

}  // namespace genscope
