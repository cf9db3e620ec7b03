// The tessera binary: one executable, one subcommand per job.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "common/logging.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a distributed LLM inference server"};
  app.require_subcommand(1);
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
    ->capture_default_str();
  const std::vector<tessera::cli::command> commands{
    tessera::cli::add_serve_command(app),
    tessera::cli::add_node_command(app),
    tessera::cli::add_generate_command(app),
    tessera::cli::add_model_command(app),
    tessera::cli::add_bench_command(app),
  };
  CLI11_PARSE(app, argc, argv);
  tessera::init_logging(log_level);
  for (const auto& c : commands)
    if (c.sub->parsed())
      return c.run();
  return 1;
}
