// The paths the unit tests use (the checkout, the build's programs), defined once per build
// in the generated test_paths.cpp and named by the GENSCOPE_SOURCE_DIR, GENSCOPE_CLI, ...
// macros (tests/CMakeLists.txt force-includes this header).
#pragma once

namespace genscope_test {
extern const char* const kSourceDir;
extern const char* const kFakeNvml;
extern const char* const kPython;
extern const char* const kMinimal;
extern const char* const kCli;
extern const char* const kTestChild;
}  // namespace genscope_test
