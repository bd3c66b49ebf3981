// The subcommands of `bucketsim`, one table and one file each (cmd_<name>.cc), with the flags
// several commands share defined once here. A command registers its options on its CLI11
// subcommand and sets `exit_code` when it runs. Exit codes, as docs/commands.md documents them:
// 0 success or budget kept, 1 a budget broken, 2 bad usage or bad input (never a pass).
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/gpu_catalog.h"
#include "core/status.h"
#include "engine/replay_policies.h"
#include "report/memory_viz_snapshot.h"
#include "report/report_context.h"

namespace bucketsim {

inline constexpr int kExitOk = 0;
inline constexpr int kExitBudgetBroken = 1;
inline constexpr int kExitError = 2;

struct CommandContext {
  std::vector<std::string> argv;
  int exit_code = kExitOk;
};

struct CommandSpec {
  const char* name;
  const char* description;
  void (*add)(CLI::App& command, CommandContext& context);
};

void AddCompareCommand(CLI::App& command, CommandContext& context);
void AddCheckCommand(CLI::App& command, CommandContext& context);
void AddValidateCommand(CLI::App& command, CommandContext& context);
void AddGenCommand(CLI::App& command, CommandContext& context);
void AddReportCommand(CLI::App& command, CommandContext& context);
void AddVersionCommand(CLI::App& command, CommandContext& context);
void AddRunCommand(CLI::App& command, CommandContext& context);
void AddCalibrateCommand(CLI::App& command, CommandContext& context);
void AddSweepCommand(CLI::App& command, CommandContext& context);
void AddTuneCommand(CLI::App& command, CommandContext& context);

// --progress and --quiet: progress of long work on stderr (cli/progress_reporter.h).
struct ProgressFlags {
  bool progress = false;  // also when stderr is not a terminal
  bool quiet = false;     // never
};
void AddProgressFlags(CLI::App& command, ProgressFlags& flags);
// ReadTrace with a progress line ("WHAT FILE: ... of ... (..%), N events, rate, ETA; DETAIL")
// while it runs for more than about 2 s.
Status ReadTraceWithProgress(const std::string& path, TraceHeader& header, EventSink& sink,
                             const ProgressFlags& flags, std::string_view what, std::string detail);

// Flags shared by the commands that replay a trace.
struct ReplayFlags {
  std::string trace;
  std::vector<std::string> policies;
  std::optional<double> bucket_cap_mb;
  std::string json_path;
  std::string allocator = "caching";
  std::optional<std::string> alloc_conf;  // unset: the trace's; "": PyTorch's defaults
  std::string device_memory;              // SIZE; empty: unlimited
  std::string device_overhead;            // SIZE; empty: the estimate (memory/device_overhead.h)
  std::string profile_path;  // --profile: the sim's time model; empty: copies and collectives free
  // A GPU's name as --profile: the efficiencies its estimate assumes (tune's --gpu-efficiency).
  GpuEfficiency profile_efficiency;
  ProgressFlags progress;
  bool full_log = false;  // --full-log: every collective in the report, not only the summary
  bool wide = false;      // --wide (compare, sweep, run): console tables at full width
  unsigned jobs = 1;      // --jobs (compare, sweep, check): replay threads; 0: every core
};
void AddTraceArgument(CLI::App& command, std::string& trace, bool required);
// `with_cap`: also --bucket-cap-mb as one number (sweep defines its own list instead).
void AddReplayFlags(CLI::App& command, ReplayFlags& flags, bool with_cap = true);

// --jobs N for the commands that replay on the sim (default: every core).
void AddJobsFlag(CLI::App& command, unsigned& jobs);

// --wide: console tables at their full width, never split to fit the terminal.
void AddWideFlag(CLI::App& command, bool& wide);
// The width console tables and paragraphs fit (RenderText, WrapText); 0 is no limit. None with
// --wide; else $COLUMNS where it is a positive number (the user's choice, also into a pipe);
// else the terminal's width where stdout is a terminal; else none, so that what goes to a file,
// a pipe or a CI log keeps whole lines for grep and diff.
std::size_t ConsoleWidth(bool wide);

// What a command asks of a replay beyond the shared flags.
struct ReplayExtras {
  // Replaces the --policy flags when set (sweep's (policy, cap) pairs).
  std::optional<std::vector<PolicySpec>> policies;
  // The policy (an index into the policies) whose timeline is kept (--chrome-trace).
  std::optional<std::size_t> timeline_policy;
  // The sim's compute spans last dur_us times this (run --compute-scale; 1 elsewhere).
  double compute_scale = 1.0;
  // By policy: who is told of that replay's memory events (--memory-viz); not owned.
  std::vector<MemoryEventSink*> memory_events = {};
};
// The memory model's options the flags give (--allocator, --alloc-conf, --device-memory,
// --device-overhead), sizes parsed.
Result<MemoryModelOptions> MemoryOptionsOf(const ReplayFlags& flags);
// The device a replay of `header` with these flags runs on (memory/device_overhead.h): what a
// replay's RunResult::device holds, for a command that has the header but not the runs (sweep
// under mpirun); none without --device-memory.
Result<std::optional<DeviceBudget>> DeviceBudgetOfFlags(const ReplayFlags& flags,
                                                        const TraceHeader& header);
// compare's and sweep's "device: ..." line (report/console_table.h), when there is a device.
void PrintDeviceBudget(const std::optional<DeviceBudget>& device);
// The policies, the cap override, the memory model and the sim backend (priced by --profile, if
// given) the flags ask for.
Result<ReplayRequest> MakeReplayRequest(const ReplayFlags& flags,
                                        const std::vector<PolicySpec>& default_policies,
                                        ReplayExtras extras = {});
// Parses the policies, reads the trace once and replays it under each of them.
// The policies a command compares without --policy: those of the trace's FSDP implementation
// (its header's fsdp_impl: its own policy first), read from the trace's header; a trace on
// stdin gets DefaultPolicies().
std::vector<PolicySpec> DefaultPoliciesOf(const ReplayFlags& flags);
// The policy of the run itself, for a trace emitted for PyTorch's FSDP1 or FSDP2 (its header's
// fsdp_impl); none for fairscale's, unnamed, or stdin traces, whose bucket policy is a choice.
std::optional<PolicySpec> OwnPolicyOf(const ReplayFlags& flags);
Result<ReplayOutcome> RunReplays(const ReplayFlags& flags,
                                 const std::vector<PolicySpec>& default_policies,
                                 ReplayExtras extras = {});
// --policy values parsed, or `default_policies` when none was given.
Result<std::vector<PolicySpec>> ParsePolicyFlags(const ReplayFlags& flags,
                                                 const std::vector<PolicySpec>& default_policies);
// The context block of a report about `trace` replayed with `flags`, before the replay: its trace
// fields are filled from the header the replay read (DescribeTrace), so the file is read once.
Result<ReportContext> ContextFor(const CommandContext& context, const ReplayFlags& flags);

// ParseSize for a flag's value; a failure's message names the flag.
Result<Bytes> ParseSizeFlag(std::string_view flag, std::string_view text);
// --device-memory's value: a SIZE, or a device's name (memory/device_capacity.h: the bytes
// torch reports as its total_memory). Every command that takes the flag parses it here; a
// failure names the flag and lists the device names.
Result<Bytes> ParseDeviceMemoryFlag(std::string_view text);
// The help of --device-memory, with the device names; `what` says what the capacity is for.
std::string DeviceMemoryHelp(std::string_view what);
// The same for a memory budget: a plain number below 1 MiB ("--max-peak-reserved 40") is bytes
// as any SIZE without a unit, but far likelier a forgotten unit, so it is warned about on stderr.
Result<Bytes> ParseBudgetFlag(std::string_view flag, std::string_view text);
// What a numeric flag accepts. Every numeric flag goes through ParseNumberFlag, so a unit where
// a plain number belongs ("--bucket-cap-mb 25MB") is answered with what the flag takes.
enum class NumberKind { kFinite, kNonNegative, kPositiveInteger };
struct NumberFlagSpec {
  std::string flag;     // "--bucket-cap-mb"
  std::string unit;     // "MiB"; "" for a count or a factor
  std::string example;  // "25"
  NumberKind kind = NumberKind::kFinite;
};
// "--bucket-cap-mb: takes MiB as a plain number (e.g. 25), not '25MB'" on a bad value.
Result<double> ParseNumberFlag(const NumberFlagSpec& spec, std::string_view text);
// ParseNumberFlag as a CLI11 check (CLI11 prefixes the flag's name).
CLI::Validator NumberFlag(NumberFlagSpec spec);
// The entries of a comma-separated list flag (each value of a repeatable flag may hold several):
// an empty entry ("1,5,,25") is refused, not dropped as CLI11's own delimiter would.
Result<std::vector<std::string>> SplitListEntries(std::string_view flag,
                                                  const std::vector<std::string>& values);

// Prints "bucketsim: error: <message>" on stderr and returns kExitError.
int ReportError(const Status& status);
// compare and sweep on a trace without reduce-scatter requests (an imported snapshot): every
// policy sees the same events, so say in one line why the rows agree and where a
// policy-replayable trace comes from.
void PrintNoteIfNoReduceScatter(const TraceSummary& summary, std::size_t width = 0);
// The same from the count of the trace's reduce-scatter requests (rs events).
void PrintNoteIfNoReduceScatter(std::uint64_t reduce_scatter_requests, std::size_t width = 0);
// The trace's reduce-scatter requests (rs events).
std::uint64_t ReduceScatterRequests(const TraceSummary& summary);

class MpiWorld;
// For a real backend's on_fatal (a failure other ranks may be blocked on): prints
// "bucketsim: rank R: error: MESSAGE; aborting every rank" and ends the whole job, `grace` after
// printing (a lost rank is noticed by every survivor at about the same time: each says so
// before the first to abort ends the rest).
std::function<void(const std::string&)> AbortEveryRank(
    MpiWorld& world, std::chrono::milliseconds grace = std::chrono::milliseconds(0));
// --timeout SECONDS for commands that run a real backend (the watchdog; 0: never).
void AddTimeoutFlag(CLI::App& command, double& timeout_s);
// The trace `compare` replays when none is given.
std::string DefaultTracePath();

// --memory-viz DIR: one snapshot file per policy, DIR/<policy>.pickle (DIR/<policy>.rank<R>.pickle
// with `rank`), opened before any replay: the caching allocator model only, and an IoError naming
// DIR when it cannot be made or written to. Two policies whose names give the same file name get
// "-2", "-3" ... after it.
Result<std::vector<std::unique_ptr<MemoryVizSnapshot>>> OpenMemoryViz(
    const std::string& dir, const ReplayFlags& flags, const std::vector<PolicySpec>& policies,
    std::optional<int> rank = std::nullopt);
// The sinks of ReplayExtras::memory_events.
std::vector<MemoryEventSink*> MemoryEventSinks(
    const std::vector<std::unique_ptr<MemoryVizSnapshot>>& snapshots);
// "memory snapshot (POLICY): PATH (N trace entries, SIZE)" per file written, on `out`, then how to
// open them.
void PrintMemoryViz(std::FILE* out,
                    const std::vector<std::unique_ptr<MemoryVizSnapshot>>& snapshots,
                    const std::vector<PolicySpec>& policies);

}  // namespace bucketsim
