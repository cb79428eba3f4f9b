// A main() for fuzz targets built without libFuzzer: feeds every regular file under the
// paths given as arguments (recursively) to LLVMFuzzerTestOneInput once. A crash fails the
// process; a path that cannot be read is an error too (exit 2). Files over kMaxInputBytes are
// left out and counted: fuzz inputs are small (scripts/fuzz seeds each target from its own
// fixture folder), and a large data fixture (a recorded tensor file of several MB) would only
// make every target's replay slow.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

constexpr std::uintmax_t kMaxInputBytes = 1u << 20;

bool run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return false;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  // A fresh heap copy of exactly the file size, so ASan builds catch reads past the end.
  std::vector<std::uint8_t> exact(bytes.begin(), bytes.end());
  LLVMFuzzerTestOneInput(exact.data(), exact.size());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 0, too_large = 0;
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path root(argv[i]);
    std::error_code ec;
    if (std::filesystem::is_regular_file(root, ec)) {
      ok = run_file(root) && ok;
      ++count;
      continue;
    }
    if (!std::filesystem::is_directory(root, ec)) {
      std::fprintf(stderr, "no such file or folder: %s\n", argv[i]);
      ok = false;
      continue;
    }
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file()) continue;
      if (entry.file_size(ec) > kMaxInputBytes) {
        ++too_large;
        continue;
      }
      ok = run_file(entry.path()) && ok;
      ++count;
    }
  }
  std::printf("replayed %zu inputs (%zu over %ju bytes left out)\n", count, too_large,
              kMaxInputBytes);
  return ok ? 0 : 2;
}
