// write_safetensors: header built in entry order, padded with spaces to 8 bytes, written
// atomically through AtomicFile.
#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "formats/atomic_file.hpp"
#include "formats/strided_copy.hpp"
#include "formats/utf8.hpp"
#include "genscope/safetensors.hpp"

namespace genscope {

namespace {

std::string json_string(const std::string& s, const char* what) {
  if (auto bad = detail::find_invalid_utf8(s)) {
    throw Error("InvalidHeaderUtf8",
                std::string(what) + " is not valid UTF-8 at byte " + std::to_string(*bad));
  }
  return nlohmann::json(s).dump();
}

std::uint64_t checked_nbytes(const SafetensorsSource& t) {
  constexpr auto kLimit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  std::uint64_t n = 1;
  for (std::int64_t d : t.shape) {
    if (d < 0) {
      throw Error("InvalidShape",
                  "tensor '" + t.name + "': negative dimension " + std::to_string(d));
    }
  }
  for (std::int64_t d : t.shape) {
    if (d == 0) return 0;
  }
  for (std::int64_t d : t.shape) {
    if (n > kLimit / static_cast<std::uint64_t>(d)) {
      throw Error("SizeOverflow", "tensor '" + t.name + "': shape x dtype size overflows");
    }
    n *= static_cast<std::uint64_t>(d);
  }
  if (n > kLimit / dtype_size(t.dtype)) {
    throw Error("SizeOverflow", "tensor '" + t.name + "': shape x dtype size overflows");
  }
  return n * dtype_size(t.dtype);
}

}  // namespace

void write_safetensors(const std::filesystem::path& path,
                       const std::vector<SafetensorsSource>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (t.name == "__metadata__") {
      throw Error("DuplicateKey", "tensor name '__metadata__' collides with the metadata key");
    }
    if (!names.insert(t.name).second) {
      throw Error("DuplicateKey", "tensor name '" + t.name + "' appears twice");
    }
  }

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += json_string(k, "metadata key");
      header += ':';
      header += json_string(v, "metadata value");
    }
    header += '}';
  }
  std::vector<std::uint64_t> sizes;
  sizes.reserve(tensors.size());
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    const std::uint64_t nbytes = checked_nbytes(t);
    if (header.size() > 1) header += ',';
    header += json_string(t.name, "tensor name");
    header += ":{\"dtype\":\"";
    header += dtype_name(t.dtype);
    header += "\",\"shape\":[";
    for (std::size_t i = 0; i < t.shape.size(); ++i) {
      if (i > 0) header += ',';
      header += std::to_string(t.shape[i]);
    }
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + nbytes) + "]}";
    offset += nbytes;
    sizes.push_back(nbytes);
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');  // data section starts 8-byte aligned

  std::byte length[8];
  for (int i = 0; i < 8; ++i) length[i] = std::byte((header.size() >> (8 * i)) & 0xFF);

  detail::AtomicFile file(path);
  file.write(std::span<const std::byte>(length, 8));
  file.write(header);
  // One buffer, sized for the largest whole fill (or part), reused for every tensor. Parts
  // are written as soon as they are filled, so a large tensor goes through the cache in
  // pieces instead of being copied out of memory again by write().
  std::uint64_t buffer_bytes = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const bool parts = static_cast<bool>(tensors[i].fill_part);
    if (parts && tensors[i].part_bytes == 0) {
      throw Error("InvalidArgument", "tensor '" + tensors[i].name + "': fill_part without part_bytes");
    }
    buffer_bytes = std::max(buffer_bytes, parts ? std::min(tensors[i].part_bytes, sizes[i]) : sizes[i]);
  }
  std::vector<std::byte> buffer(static_cast<std::size_t>(buffer_bytes));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (!tensors[i].fill_part) {
      std::span<std::byte> out(buffer.data(), static_cast<std::size_t>(sizes[i]));
      tensors[i].fill(out);
      file.write(out);
      continue;
    }
    for (std::uint64_t off = 0; off < sizes[i]; off += tensors[i].part_bytes) {
      std::span<std::byte> out(buffer.data(), static_cast<std::size_t>(std::min(tensors[i].part_bytes, sizes[i] - off)));
      tensors[i].fill_part(off, out);
      file.write(out);
    }
  }
  file.commit();
}

SafetensorsSource safetensors_source(std::string name, const TensorView& view) {
  SafetensorsSource source;
  source.name = std::move(name);
  source.dtype = view.dtype;
  source.shape = view.shape;
  source.fill = [view](std::span<std::byte> out) { detail::copy_to_contiguous(view, out); };
  return source;
}

}  // namespace genscope
