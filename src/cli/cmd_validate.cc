// bucketsim validate TRACE: every rule of the format and of consistency, reported rather than
// stopped at; for a trace imported from a PyTorch memory snapshot, how well the replays
// reproduce it (engine/snapshot_comparison.h).
#include <cstdio>
#include <memory>

#include <fmt/format.h>

#include "cli/command.h"
#include "engine/snapshot_comparison.h"
#include "engine/trace_checker.h"
#include "io/trace_reader.h"
#include "memory/make_memory_model.h"
#include "report/json_report.h"
#include "report/validation_report.h"

namespace bucketsim {
namespace {

struct ValidateFlags {
  std::string trace;
  std::string json_path;
  std::string alloc_conf;  // empty: the trace's alloc_conf
  bool alloc_conf_given = false;
  std::string device_memory;
  std::string device_overhead;
  ProgressFlags progress;
};

int RunValidate(const ValidateFlags& flags) {
  std::optional<Bytes> capacity;
  if (!flags.device_memory.empty()) {
    Result<Bytes> parsed = ParseDeviceMemoryFlag(flags.device_memory);
    if (!parsed.ok()) return ReportError(parsed.status());
    capacity = *parsed;
  }
  std::optional<Bytes> overhead;
  if (!flags.device_overhead.empty()) {
    Result<Bytes> parsed = ParseSizeFlag("--device-overhead", flags.device_overhead);
    if (!parsed.ok()) return ReportError(parsed.status());
    overhead = *parsed;
  }
  MemoryModelOptions options{"caching", std::nullopt, capacity, overhead};
  if (flags.alloc_conf_given) options.alloc_conf = flags.alloc_conf;
  Result<MemoryModelFactory> factory = MakeMemoryModelFactory(options);
  if (!factory.ok()) return ReportError(factory.status());
  std::string alloc_conf_used;
  SnapshotComparison comparison([&](const TraceHeader& header) {
    alloc_conf_used = AllocConfFor(options, header);
    return (*factory)(header);
  });
  TraceHeader header;
  TraceChecker checker(&comparison, CheckerMode::kReport);
  Status status =
      ReadTraceWithProgress(flags.trace, header, checker, flags.progress, "validating", "");
  if (!status.ok()) return ReportError(status);

  ValidationReport report;
  report.path = flags.trace;
  report.header = &header;
  report.summary = &checker.summary();
  report.alloc_conf = alloc_conf_used;
  if (comparison.agreement().observed_events > 0) {
    report.snapshot = comparison.agreement();
    report.accounting_disagrees = comparison.AccountingDisagrees();
  }
  std::printf("%s", ValidationTable(report).c_str());
  if (!flags.json_path.empty()) {
    Status written = WriteTextFile(flags.json_path, ValidationJson(report));
    if (!written.ok()) return ReportError(written);
  }
  const bool consistent =
      checker.summary().num_inconsistencies() == 0 && !report.accounting_disagrees;
  return consistent ? kExitOk : kExitBudgetBroken;
}

}  // namespace

void AddValidateCommand(CLI::App& command, CommandContext& context) {
  auto flags = std::make_shared<ValidateFlags>();
  AddTraceArgument(command, flags->trace, /*required=*/true);
  command.add_option("--json", flags->json_path, "Also write the report as JSON to FILE");
  AddProgressFlags(command, flags->progress);
  command
      .add_option("--alloc-conf", flags->alloc_conf,
                  "Caching allocator settings the snapshot comparison replays with "
                  "(PYTORCH_CUDA_ALLOC_CONF syntax; default: the trace's alloc_conf)")
      ->each([flags](const std::string&) { flags->alloc_conf_given = true; });
  command.add_option("--device-memory", flags->device_memory,
                     DeviceMemoryHelp("for the snapshot comparison's caching model, which "
                                      "gets it less --device-overhead"));
  command.add_option("--device-overhead", flags->device_overhead,
                     "Device memory outside the caching allocator (SIZE; default: the estimate "
                     "of the CUDA context and NCCL's buffers, docs/memory-model.md)");
  command.footer(
      "Exit 0 when the trace is consistent; 1 when it breaks consistency rules (each kind is\n"
      "counted, with its first events), or, for an imported snapshot, when the replayed\n"
      "accounting disagrees with the snapshot's; 2 when it cannot be read or breaks the format\n"
      "(the file, the event index and the reason). Segment divergences of the caching model\n"
      "are reported, not failed.\n\nExamples:\n"
      "  bucketsim validate traces/tiny-ws2.json\n"
      "  tools/snapshot_to_trace.py snap.pickle -o snap.json && bucketsim validate snap.json "
      "--json v.json");
  command.callback([flags, &context] { context.exit_code = RunValidate(*flags); });
}

}  // namespace bucketsim
