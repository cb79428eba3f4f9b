// libFuzzer target: parse_npy on arbitrary bytes (with and without a stored dtype). Any input
// either throws genscope::Error or yields an array whose view covers exactly its bytes.
#include <cstddef>
#include <cstdint>
#include <span>

#include "fuzz_touch.hpp"
#include "genscope/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace genscope;
  const auto bytes = std::as_bytes(std::span<const std::uint8_t>(data, size));
  for (std::optional<DType> stored : {std::optional<DType>(), std::optional<DType>(DType::kBF16)}) {
    try {
      const NpyArray a = parse_npy(bytes, stored);
      const TensorView v = a.view();
      if (static_cast<std::uint64_t>(v.nbytes()) != a.bytes().size()) __builtin_trap();
      volatile std::uint8_t sink = fuzz::touch_view(v);
      (void)sink;
    } catch (const Error&) {
      // Rejected input.
    }
  }
  return 0;
}
