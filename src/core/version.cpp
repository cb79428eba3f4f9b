// The library version, set by CMake from project(VERSION).
#include "genscope/version.hpp"

namespace genscope {

const char* version() noexcept { return GENSCOPE_VERSION; }

}  // namespace genscope
