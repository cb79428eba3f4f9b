// A small program monitored by genscope: steps that allocate and free known amounts of memory,
// a nested step, a spike shorter than the sampling interval, a fallback chain and an iteration
// loop. Usage: genscope_minimal [run.json] [sample_interval_ms]
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <new>
#include <stdexcept>
#include <thread>

#include "genscope/genscope.hpp"

namespace {

constexpr std::size_t kMiB = 1024 * 1024;

// Resident memory of an exact size: mmap + touch every page; munmap gives it back at once.
struct Block {
  explicit Block(std::size_t bytes) : size(bytes) {
    data = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) throw std::bad_alloc();
    std::memset(data, 1, bytes);
  }
  ~Block() { ::munmap(data, size); }
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  void* data;
  std::size_t size;
};

}  // namespace

int main(int argc, char** argv) {
  const char* out = argc > 1 ? argv[1] : "minimal-run.json";
  const int interval_ms = argc > 2 ? std::atoi(argv[2]) : 10;

  genscope::MonitorOptions options;
  options.sample_interval = std::chrono::milliseconds(interval_ms);
  genscope::Monitor monitor(options);
  genscope::ActiveRun run = monitor.start_run(
      {.pipeline = {.name = "minimal", .model = "none", .architecture = "", .parameters = {}}});

  Block* weights = nullptr;
  {
    GENSCOPE_STEP(run, genscope::StepKind::kModelLoading, "load weights (64 MiB kept)");
    weights = new Block(64 * kMiB);
  }
  {
    // A 16 MiB spike freed within ~2 ms: shorter than the sampling interval.
    GENSCOPE_STEP(run, genscope::StepKind::kCustom, "spike (16 MiB, freed at once)");
    { Block spike(16 * kMiB); }
    std::this_thread::sleep_for(std::chrono::milliseconds(3 * interval_ms));
  }
  {
    genscope::Step step = run.step(genscope::StepKind::kLatentGeneration, "encode (fallback chain)");
    bool done = step.try_attempt("direct", [] { throw std::runtime_error("out of memory (budget 0)"); });
    if (!done) done = step.try_attempt("tiled", [] { Block tile(8 * kMiB); });
    step.add_counter("frames", 16);
    step.add_counter("bytes", 16.0 * 512 * 512 * 3);
  }
  {
    genscope::Step step = run.step(genscope::StepKind::kSampling, "sampling (10 iterations)");
    step.begin_iterations();
    for (int i = 0; i < 10; ++i) {
      Block scratch(4 * kMiB);
      std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 8 : 2));
      step.mark_iteration();
    }
  }
  {
    GENSCOPE_STEP(run, genscope::StepKind::kVaeDecode, "decode (outer 16 MiB)");
    Block outer(16 * kMiB);
    {
      GENSCOPE_STEP(run, genscope::StepKind::kCustom, "decode tile (inner 24 MiB)");
      Block inner(24 * kMiB);
    }
  }
  try {
    run.run_step(genscope::StepKind::kSave, "save (fails)", [](genscope::Step&) {
      throw std::runtime_error("disk full (simulated)");
    });
  } catch (const std::runtime_error&) {
    // The pipeline's own exception comes back unchanged; the step recorded it.
  }
  delete weights;

  genscope::Run result = run.finish();
  genscope::write_run_file(result, out);
  std::cout << genscope::render_console(result, {.plain = true});
  return 0;
}
