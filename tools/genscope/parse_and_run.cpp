// Parsing a command line and running its subcommand, with genscope's error reporting: shared
// by the genscope program and genscope-demo.
#include <iostream>

#include "command.hpp"
#include "genscope/error.hpp"

namespace genscope::cli {

int parse_and_run(CLI::App& app, CommandContext& context, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const genscope::Error& e) {
    std::cerr << "genscope: error [" << e.name() << "]: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "genscope: error: " << e.what() << "\n";
    return 2;
  }
  return context.exit_code;
}

}  // namespace genscope::cli
