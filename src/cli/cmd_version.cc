// bucketsim version: the build and the backends it can run on here.
#include <cstdio>

#include "backend/availability.h"
#include "cli/command.h"

namespace bucketsim {
namespace {

void PrintBackend(const BackendAvailability& backend) {
  const char* state = !backend.compiled ? "not compiled" : backend.usable ? "usable" : "compiled";
  std::printf("  %-5s %-12s %s\n", backend.name.c_str(), state, backend.detail.c_str());
}

}  // namespace

void AddVersionCommand(CLI::App& command, CommandContext& context) {
  command.footer("Example:\n  bucketsim version");
  command.callback([&context] {
    std::printf("bucketsim %s\nbackends:\n", BUCKETSIM_VERSION);
    PrintBackend({"sim", true, true, "reference backend, always built"});
    PrintBackend(ProbeHostBackend());
    PrintBackend(ProbeCudaBackend());
    context.exit_code = kExitOk;
  });
}

}  // namespace bucketsim
