// Output files of the reference pipeline: 8-bit RGB PNG images (tensor dumps use genscope/npy.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace genscope::detail {

/// Encodes an 8-bit RGB image (row-major, 3 bytes per pixel) as PNG bytes.
std::vector<std::uint8_t> encode_png_rgb8(std::span<const std::uint8_t> rgb, int width, int height);

/// Writes bytes to `path` atomically; throws genscope::Error("WriteFailed").
void write_bytes(const std::filesystem::path& path, std::span<const std::uint8_t> bytes);

}  // namespace genscope::detail
