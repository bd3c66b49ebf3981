// bucketsim: replays FSDP training traces under gradient-bucket policies and reports memory.
#include <algorithm>
#include <array>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "cli/command.h"
#include "core/closest_name.h"
#include "io/atomic_file.h"

namespace bucketsim {
namespace {

constexpr std::array<CommandSpec, 10> kCommands = {{
    {"compare", "Replay a trace under several bucket policies and compare their memory",
     &AddCompareCommand},
    {"sweep",
     "Replay a trace under every (policy, bucket cap): memory against predicted time, the "
     "Pareto set, the fastest configuration within a budget",
     &AddSweepCommand},
    {"tune",
     "Emit a model program in every combination of the gen program flags it varies (batch "
     "size, checkpointing, optimizer, ...) and say what fits: the largest batch size, the "
     "fastest configuration",
     &AddTuneCommand},
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

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (const CommandSpec& spec : kCommands) names.emplace_back(spec.name);
  return names;
}

// CLI11 answers a mistyped command with "A subcommand is required": name it and suggest.
std::optional<std::string> UnknownCommand(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return std::nullopt;
  std::string typed = argv[1];
  std::vector<std::string> names = CommandNames();
  if (std::find(names.begin(), names.end(), typed) != names.end()) return std::nullopt;
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  return fmt::format("unknown command '{}'{} (commands: {})", typed, DidYouMean(typed, names),
                     list);
}

// The first argument of `command` that looks like a flag it does not have, with the nearest
// flag it does have: CLI11 says only "arguments were not expected".
std::optional<std::string> UnknownFlag(const CLI::App& command, int argc, char** argv) {
  std::vector<std::string> flags = {"--help"};
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) flags.push_back("--" + name);
  }
  for (int i = 2; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg.size() < 2 || arg[0] != '-' || arg == "--") continue;
    std::string name(arg.substr(0, arg.find('=')));
    if (name.rfind("--", 0) != 0) {
      if (command.get_option_no_throw(name) != nullptr || name == "-h") continue;
      // A negative number is a value, not a flag.
      if (name.find_first_not_of("-0123456789.") == std::string::npos) continue;
    } else if (std::find(flags.begin(), flags.end(), name) != flags.end()) {
      continue;
    }
    std::string path = command.get_name();  // "compare", "gen transformer"
    for (const CLI::App* parent = command.get_parent(); parent && parent->get_parent();
         parent = parent->get_parent()) {
      path = parent->get_name() + " " + path;
    }
    return fmt::format("{}: unknown flag '{}'{} (see 'bucketsim {} --help')", path, name,
                       DidYouMean(name, flags), path);
  }
  return std::nullopt;
}

// The unknown flag (with the nearest known one) of the command CLI11 was parsing, if any.
std::optional<std::string> UnknownFlagOfParsed(const CLI::App& app, int argc, char** argv) {
  for (const CLI::App* command : app.get_subcommands()) {
    // gen's presets are subcommands of gen: their flags are the deepest command's.
    while (!command->get_subcommands().empty()) command = command->get_subcommands().front();
    if (std::optional<std::string> unknown = UnknownFlag(*command, argc, argv)) return unknown;
  }
  return std::nullopt;
}

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
  // CLI11's own messages (a flag's value refused, a required flag missing) read as every other
  // error does.
  app.failure_message([](const CLI::App* failed, const CLI::Error& e) {
    return "bucketsim: error: " + CLI::FailureMessage::simple(failed, e);
  });
  for (const CommandSpec& spec : kCommands) {
    CLI::App* command = app.add_subcommand(spec.name, spec.description);
    spec.add(*command, context);
  }
  if (std::optional<std::string> unknown = UnknownCommand(argc, argv)) {
    std::fprintf(stderr, "bucketsim: error: %s\n", unknown->c_str());
    return kExitError;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    // A flag the command does not have is the likelier cause of any parse error: CLI11 says only
    // "arguments were not expected", or that the flag it was misspelt for is required.
    if (std::optional<std::string> unknown = UnknownFlagOfParsed(app, argc, argv)) {
      std::fprintf(stderr, "bucketsim: error: %s\n", unknown->c_str());
      return kExitError;
    }
    // CLI11 prints its own message; usage errors share exit code 2 with input errors.
    app.exit(e);
    return kExitError;
  }
  return context.exit_code;
}

}  // namespace
}  // namespace bucketsim

int main(int argc, char** argv) { return bucketsim::Main(argc, argv); }
