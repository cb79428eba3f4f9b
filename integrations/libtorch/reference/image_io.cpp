// PNG and .npy writers of the reference pipeline.
//
// PNG layout written here:
//
//   89 50 4E 47 0D 0A 1A 0A                         signature
//   [len u32 BE]["IHDR"][w u32][h u32][8][2][0][0][0][crc32]   8-bit truecolour
//   [len u32 BE]["IDAT"][zlib stream of rows: filter byte 0 + RGB bytes][crc32]
//   [0]["IEND"][crc32]

#include "image_io.hpp"

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "genscope/error.hpp"

namespace genscope::detail {
namespace {

void put_u32_be(std::vector<std::uint8_t>& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(v >> shift));
}

void put_chunk(std::vector<std::uint8_t>& out, const char type[4],
               std::span<const std::uint8_t> data) {
  put_u32_be(out, static_cast<std::uint32_t>(data.size()));
  const std::size_t type_at = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  const uLong crc = crc32(0L, out.data() + type_at, static_cast<uInt>(4 + data.size()));
  put_u32_be(out, static_cast<std::uint32_t>(crc));
}

}  // namespace

std::vector<std::uint8_t> encode_png_rgb8(std::span<const std::uint8_t> rgb, int width,
                                          int height) {
  const std::size_t row = static_cast<std::size_t>(width) * 3;
  std::vector<std::uint8_t> raw;
  raw.reserve((row + 1) * static_cast<std::size_t>(height));
  for (int y = 0; y < height; ++y) {
    raw.push_back(0);  // filter: none
    const auto* src = rgb.data() + static_cast<std::size_t>(y) * row;
    raw.insert(raw.end(), src, src + row);
  }
  uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
  std::vector<std::uint8_t> packed(packed_size);
  if (compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 6) !=
      Z_OK) {
    throw Error("EncodeFailed", "zlib could not compress the PNG image data");
  }
  packed.resize(packed_size);

  std::vector<std::uint8_t> png = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  std::vector<std::uint8_t> ihdr;
  put_u32_be(ihdr, static_cast<std::uint32_t>(width));
  put_u32_be(ihdr, static_cast<std::uint32_t>(height));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});
  put_chunk(png, "IHDR", ihdr);
  put_chunk(png, "IDAT", packed);
  put_chunk(png, "IEND", {});
  return png;
}

void write_bytes(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) throw Error("WriteFailed", "cannot write '" + tmp.string() + "'");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw Error("WriteFailed", "cannot rename to '" + path.string() + "': " + ec.message());
}

}  // namespace genscope::detail
