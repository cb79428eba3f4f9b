// libFuzzer target: SafetensorsFile::parse on arbitrary bytes. Any input either throws
// genscope::Error or yields entries that tile the data section exactly; every tensor byte
// is read through its view.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_touch.hpp"
#include "genscope/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  try {
    const SafetensorsFile file =
        SafetensorsFile::parse(std::as_bytes(std::span<const std::uint8_t>(data, size)));
    std::uint64_t total = 0;
    volatile std::uint8_t sink = 0;
    for (const SafetensorsEntry& e : file.entries()) {
      const TensorView v = file.view(e);
      if (static_cast<std::uint64_t>(v.nbytes()) != e.nbytes()) __builtin_trap();
      if (file.find(e.name) == nullptr) __builtin_trap();
      if (e.begin != total) __builtin_trap();  // entries tile the data section in order
      total = e.end;
      sink = sink ^ fuzz::touch_view(v);
    }
    if (8 + file.header_size() + total != file.file_size()) __builtin_trap();
    for (const auto& [k, v] : file.metadata())
      sink = sink ^ static_cast<std::uint8_t>(k.size() + v.size());
  } catch (const Error&) {
    // Rejected input: the expected outcome for most of the corpus.
  }
  return 0;
}
