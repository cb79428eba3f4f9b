// `genscope demo` runs the genscope-demo program: only it links LibTorch, whose loading
// (hundreds of shared libraries, ~0.4 s) every other command skips. It is looked for next to
// this genscope (scripts/setup's build, a `cmake --install`), then on the PATH (a pip wheel's
// genscope, built without LibTorch, uses the genscope-demo that scripts/setup links into
// /usr/local/bin).
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
  std::string beside = ec ? std::string() : (self.parent_path() / "genscope-demo").string();
  std::string beside_error = ec ? ec.message() : std::string();
  if (!beside.empty()) {
    argv[0] = beside.data();
    ::execv(beside.c_str(), argv);
    beside_error = std::strerror(errno);
  }
  std::string on_path = "genscope-demo";
  argv[0] = on_path.data();
  ::execvp(on_path.c_str(), argv);  // returns only when none on the PATH could be run
  const std::string path_error = std::strerror(errno);
  std::cerr << "genscope: error [DemoNotFound]: genscope demo runs the genscope-demo program "
               "(built with LibTorch), found neither next to this genscope ("
            << (beside.empty() ? std::string("/proc/self/exe") : beside) << ": " << beside_error
            << ") nor on the PATH (" << path_error
            << "). This genscope was built without it (a pip wheel's is); scripts/setup in a "
               "genscope checkout builds genscope-demo and links it into /usr/local/bin.\n";
  return 2;
}

}  // namespace genscope::cli
