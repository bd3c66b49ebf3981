// bucketsim: replays FSDP training traces under gradient-bucket policies and reports memory.
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "io/atomic_file.h"

namespace bucketsim {
namespace {

constexpr std::array<CommandSpec, 9> kCommands = {{
    {"compare", "Replay a trace under several bucket policies and compare their memory",
     &AddCompareCommand},
    {"sweep",
     "Replay a trace under every (policy, bucket cap): memory against predicted time, the "
     "Pareto set, the fastest configuration within a budget",
     &AddSweepCommand},
    {"check", "Fail (exit 1) when a policy breaks a memory budget on a trace", &AddCheckCommand},
    {"calibrate",
     "Measure reduce-scatter and copy times on this machine (under mpirun) and write a time "
     "profile for the sim",
     &AddCalibrateCommand},
    {"run",
     "Execute a trace for real: real buffers and reduce-scatters on MPI (host) or NCCL (cuda), "
     "verified and timed (launch with mpirun)",
     &AddRunCommand},
    {"report", "Write the HTML and Markdown report (with charts) of JSON reports",
     &AddReportCommand},
    {"validate", "Check a trace for consistency and summarise it", &AddValidateCommand},
    {"gen", "Generate a trace from a model preset", &AddGenCommand},
    {"version", "Print the version and the backends this build can run on", &AddVersionCommand},
}};

int Main(int argc, char** argv) {
  // Ctrl-C or SIGTERM mid-write: no half-written file is left, and the exit code says why.
  InstallInterruptHandlers();
  CommandContext context;
  context.argv.assign(argv, argv + argc);
  CLI::App app{
      "bucketsim: what does a gradient-bucket policy cost in memory? Replays FSDP "
      "traces under bucket policies, accounting memory as PyTorch would."};
  app.require_subcommand(1);
  app.footer(
      "Exit codes: 0 ok, 1 a budget is broken (check), 2 usage or input error, 130/143 "
      "interrupted by SIGINT/SIGTERM (no partial file is left).\n"
      "Run 'bucketsim COMMAND --help' for a command's options and an example.");
  for (const CommandSpec& spec : kCommands) {
    CLI::App* command = app.add_subcommand(spec.name, spec.description);
    spec.add(*command, context);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints its own message; usage errors share exit code 2 with input errors.
    app.exit(e);
    return e.get_exit_code() == 0 ? kExitOk : kExitError;
  }
  return context.exit_code;
}

}  // namespace
}  // namespace bucketsim

int main(int argc, char** argv) { return bucketsim::Main(argc, argv); }
