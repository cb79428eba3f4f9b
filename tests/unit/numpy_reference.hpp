// Test helper: runs a NumPy script (/usr/bin/python3) that writes raw arrays and JSON
// references into a scratch directory, and reads them back.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

namespace genscope::test {

/// A scratch directory under GENSCOPE_TEST_TMP (or the system temp dir).
inline std::filesystem::path scratch_dir(const std::string& name) {
  const char* env = std::getenv("GENSCOPE_TEST_TMP");
  std::filesystem::path root = env != nullptr ? env : std::filesystem::temp_directory_path();
  // One folder per process: ctest runs the cases of one suite as parallel processes.
  std::filesystem::path dir = root / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // Removed when the test process exits.
  static struct Cleanup {
    std::vector<std::filesystem::path> dirs;
    ~Cleanup() {
      std::error_code ec;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ec);
    }
  } cleanup;
  cleanup.dirs.push_back(dir);
  return dir;
}

/// Writes `script` to dir/gen.py and runs it with `dir` as its first argument.
inline void run_numpy(const std::filesystem::path& dir, const std::string& script) {
  const std::filesystem::path py = dir / "gen.py";
  std::ofstream(py) << script;
  const std::string cmd = std::string(GENSCOPE_PYTHON) + " " + py.string() + " " + dir.string();
  if (std::system(cmd.c_str()) != 0) throw std::runtime_error("numpy script failed: " + cmd);
}

/// Reads a whole file as bytes.
inline std::vector<std::uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Reads a JSON file.
inline nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

}  // namespace genscope::test
