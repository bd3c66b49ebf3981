// bucketsim validate TRACE: every rule of the format and of consistency, and a summary.
#include <cstdio>

#include <fmt/format.h>

#include "cli/command.h"
#include "core/size_format.h"
#include "engine/trace_checker.h"
#include "io/trace_reader.h"

namespace bucketsim {
namespace {

std::string Summarise(const std::string& path, const TraceHeader& header,
                      const TraceSummary& summary) {
  std::string out = fmt::format(
      "{}: valid trace (schema_version {})\n  world size {}, rank {}, bucket_cap_mb {}, {} "
      "stream(s), {} process group(s), {} FSDP instance(s)\n  {} events, {} iteration(s), "
      "compute {:.3f} ms\n  events by kind:",
      path, header.schema_version, header.world_size, header.rank, header.bucket_cap_mb,
      header.streams.size(), header.groups.size(), header.fsdp.size(), summary.events,
      summary.iterations, summary.compute_us / 1000.0);
  for (int k = 0; k < kNumEventKinds; ++k) {
    if (summary.events_by_kind[k] == 0) continue;
    out +=
        fmt::format(" {} {}", EventKindName(static_cast<EventKind>(k)), summary.events_by_kind[k]);
  }
  out += fmt::format("\n  most bytes live at once: {} in at most {} allocations\n",
                     FormatBytes(summary.max_live_bytes), summary.max_live_allocations);
  out += "  category          allocated in total    alive at end\n";
  for (int c = 0; c < kNumTraceCategories; ++c) {
    out +=
        fmt::format("  {:<16}  {:>18}  {:>14} ({} allocation(s))\n",
                    CategoryName(static_cast<Category>(c)), FormatBytes(summary.allocated_bytes[c]),
                    FormatBytes(summary.alive_at_end_bytes[c]), summary.alive_at_end_count[c]);
  }
  return out;
}

int RunValidate(const std::string& path) {
  TraceHeader header;
  TraceChecker checker(nullptr);
  Status status = ReadTrace(path, header, checker);
  if (!status.ok()) return ReportError(status);
  std::printf("%s", Summarise(path, header, checker.summary()).c_str());
  return kExitOk;
}

}  // namespace

void AddValidateCommand(CLI::App& command, CommandContext& context) {
  auto path = std::make_shared<std::string>();
  AddTraceArgument(command, *path, /*required=*/true);
  command.footer(
      "Exit 0 and a summary when the trace is valid; exit 2 with the file, the event index\n"
      "and the reason at the first problem.\n\nExample:\n"
      "  bucketsim validate traces/tiny-ws2.json");
  command.callback([path, &context] { context.exit_code = RunValidate(*path); });
}

}  // namespace bucketsim
