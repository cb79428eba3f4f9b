// Test helper: runs tests/data/make_models.py once per test binary into a scratch folder.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace genscope::testing {

/// The folder holding the generated models (created on first use).
inline const std::filesystem::path& model_data_dir() {
  static const std::filesystem::path dir = [] {
    const char* tmp = std::getenv("GENSCOPE_TEST_TMP");
    std::filesystem::path base = tmp != nullptr ? tmp : std::filesystem::temp_directory_path();
    std::filesystem::path d = base / ("models_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    const std::string cmd = std::string(GENSCOPE_PYTHON) + " " + GENSCOPE_SOURCE_DIR +
                            "/tests/data/make_models.py " + d.string();
    if (std::system(cmd.c_str()) != 0) throw std::runtime_error("make_models.py failed: " + cmd);
    return d;
  }();
  // Removes the generated files when the test binary exits.
  static const struct Cleanup {
    ~Cleanup() {
      std::error_code ec;
      std::filesystem::remove_all(dir, ec);
    }
  } cleanup;
  return dir;
}

/// A generated file's path.
inline std::filesystem::path model_file(const std::string& name) { return model_data_dir() / name; }

}  // namespace genscope::testing
