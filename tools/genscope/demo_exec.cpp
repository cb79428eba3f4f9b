// `genscope demo` runs the genscope-demo program installed next to genscope: only it links
// LibTorch, whose loading (hundreds of shared libraries, ~0.4 s) every other command skips.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "command.hpp"

namespace genscope::cli {

int exec_demo_program(char** argv) {
  std::error_code ec;
  // /proc/self/exe is the real file (a /usr/local/bin/genscope symlink resolved).
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path demo = self.parent_path() / "genscope-demo";
  if (!ec) {
    std::string program = demo.string();
    argv[0] = program.data();
    ::execv(program.c_str(), argv);
  }
  std::cerr << "genscope: error [DemoNotFound]: cannot run " << demo.string() << ": "
            << (ec ? ec.message() : std::string(std::strerror(errno)))
            << " (genscope demo is built with LibTorch)\n";
  return 2;
}

}  // namespace genscope::cli
