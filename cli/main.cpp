// The tessera binary: one executable, one subcommand per job.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/build_info.hpp"
#include "cli/commands.hpp"
#include "cluster/nearest_name.hpp"
#include "common/logging.hpp"
#include "engine/cpu/kernels.hpp"

namespace {

/// What `tessera --version` prints.
std::string version_text() {
  return std::string{"tessera "} + TESSERA_CLI_VERSION + "\n" +
         "commit:   " + TESSERA_CLI_GIT_COMMIT + "\n" +
         "build:    " + TESSERA_CLI_BUILD_TYPE + "\n" +
         "cpu isa:  " + std::string{tessera::engine::cpu::kernel_isa()} + " (picked at run time)\n" +
         "cuda:     " + (TESSERA_CLI_CUDA ? "on (built with the CUDA backend)" : "off (built without CUDA)");
}

/// Where the command line names a subcommand that does not exist, the
/// message saying so with the nearest name ("unknown subcommand 'serv';
/// did you mean 'serve'?"); else "". CLI11 alone would say only "A
/// subcommand is required" or that an argument was not expected.
std::string unknown_subcommand(CLI::App& app, int argc, char** argv) {
  CLI::App* at = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--")
      return {};
    if (arg.starts_with("-")) {
      // An option that takes a value consumes the next argument.
      if (arg.find('=') == std::string::npos)
        if (const auto* opt = at->get_option_no_throw(arg); opt != nullptr && opt->get_items_expected_min() > 0)
          ++i;
      continue;
    }
    auto subs = at->get_subcommands([](CLI::App*) { return true; });
    CLI::App* next = nullptr;
    std::vector<std::string> names;
    for (auto* s : subs) {
      names.push_back(s->get_name());
      if (s->check_name(arg))
        next = s;
    }
    if (next == nullptr) {
      std::string list;
      for (const auto& n : names)
        list += (list.empty() ? "" : ", ") + n;
      const std::string where = at == &app ? "tessera" : "tessera " + at->get_name();
      return "unknown subcommand " + tessera::cluster::quote_input(arg) + tessera::cluster::did_you_mean(arg, names) +
             " (" + where + " has: " + list + ")";
    }
    at = next;
    if (at->get_subcommands([](CLI::App*) { return true; }).empty())
      return {};
  }
  return {};
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tessera: a distributed LLM inference server"};
  app.require_subcommand(1);
  app.set_version_flag("--version", version_text, "Print the version, git commit, build type, CPU ISA and CUDA "
                                                  "support, and exit");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")
    ->capture_default_str();
  const std::vector<tessera::cli::command> commands{
    tessera::cli::add_serve_command(app),
    tessera::cli::add_node_command(app),
    tessera::cli::add_check_command(app),
    tessera::cli::add_chaos_command(app),
    tessera::cli::add_generate_command(app),
    tessera::cli::add_model_command(app),
    tessera::cli::add_bench_command(app),
    tessera::cli::add_launch_command(app),
  };
  if (auto unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
    std::fprintf(stderr, "tessera: %s\nRun with --help for more information.\n", unknown.c_str());
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  tessera::init_logging(log_level);
  for (const auto& c : commands)
    if (c.sub->parsed())
      return c.run();
  return 1;
}
