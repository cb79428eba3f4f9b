// arm_memory_reserve(): see memory_reserve.hpp.
#include "memory_reserve.hpp"

#include <atomic>
#include <cstdlib>
#include <new>

namespace genscope::cli {
namespace {

// Address space only: the reserve is never written, so it takes no physical memory, but
// under a limit on address space (ulimit -v) or data (ulimit -d) freeing it makes room.
constexpr std::size_t kReserveBytes = std::size_t{32} << 20;

std::atomic<void*> reserve{nullptr};

void on_allocation_failure() {
  // Free the reserve and fail this allocation (not retry it: the reserve is for the way out).
  std::free(reserve.exchange(nullptr));
  throw std::bad_alloc();
}

}  // namespace

void arm_memory_reserve() noexcept {
  if (reserve.load() == nullptr) {
    void* block = std::malloc(kReserveBytes);
    if (block != nullptr && reserve.exchange(block) != nullptr) std::free(block);
  }
  std::set_new_handler(on_allocation_failure);
}

}  // namespace genscope::cli
