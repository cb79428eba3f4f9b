// Helpers shared by the format tests: scratch folders, files, running /usr/bin/python3.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "genscope/dtype.hpp"

namespace genscope::test {

/// A fresh scratch folder for one test, under GENSCOPE_TEST_TMP (or the system temp dir).
/// Every dtype genscope reads and writes.
inline constexpr DType kAllDtypes[] = {
    DType::kF64,    DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3,
    DType::kF8E5M2, DType::kI64, DType::kI32, DType::kI16,  DType::kI8,
    DType::kU64,    DType::kU32, DType::kU16, DType::kU8,   DType::kBool,
};

inline std::filesystem::path scratch_dir(const std::string& name) {
  const char* env = std::getenv("GENSCOPE_TEST_TMP");
  std::filesystem::path root =
      env != nullptr ? std::filesystem::path(env) : std::filesystem::temp_directory_path();
  // One folder per process: ctest runs the cases of one suite as parallel processes.
  std::filesystem::path dir = root / ("formats_" + name + "." + std::to_string(::getpid()));
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

inline std::vector<std::byte> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  for (std::size_t i = 0; i < chars.size(); ++i) out[i] = std::byte(chars[i]);
  return out;
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// Runs a Python script (NumPy available) with arguments; returns its exit status and
/// appends its stdout to `output`.
inline int run_python(const std::filesystem::path& dir, const std::string& script,
                      const std::string& args, std::string* output = nullptr) {
  const std::filesystem::path file = dir / "script.py";
  write_bytes(file, script);
  const std::string cmd = std::string(GENSCOPE_PYTHON) + " " + file.string() + " " + args;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) {
    if (output != nullptr) output->append(buf, n);
  }
  const int status = ::pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace genscope::test
