// GENSCOPE_ENABLED=0 compiles every GENSCOPE_STEP to nothing: no step is recorded, and the
// argument expressions are not even evaluated.
#define GENSCOPE_ENABLED 0
#include <gtest/gtest.h>

#include "genscope/genscope.hpp"

namespace genscope {
namespace {

TEST(CompiledOut, StepMacroIsANoOp) {
  MonitorOptions o;
  o.process_probe = o.system_probe = o.nvml_probe = o.sampler = false;
  Monitor monitor(o);
  ActiveRun run = monitor.start_run();
  int evaluated = 0;
  {
    GENSCOPE_STEP(run, StepKind::kSampling, (++evaluated, "never"));
  }
  EXPECT_EQ(evaluated, 0);
  EXPECT_TRUE(run.finish().steps.empty());
}

}  // namespace
}  // namespace genscope
