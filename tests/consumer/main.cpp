// Built against the installed genscope package: one monitored step, the run document written.
#include <genscope/genscope.hpp>

#include <iostream>

int main(int argc, char** argv) {
  genscope::MonitorOptions options;
  options.nvml_probe = false;
  genscope::Monitor monitor(options);
  genscope::ActiveRun run = monitor.start_run({.pipeline = {.name = "consumer"}});
  {
    GENSCOPE_STEP(run, genscope::StepKind::kCustom, "consumer step");
  }
  const genscope::Run result = run.finish();
  if (argc > 1) genscope::write_run_file(result, argv[1]);
  std::cout << "consumer ok: " << result.steps.size() << " step, genscope " << genscope::version()
            << "\n";
  return result.steps.size() == 1 ? 0 : 1;
}
