#include "report/markdown_report.h"

#include <fmt/format.h>

#include "report/console_table.h"

namespace bucketsim {

std::string FormatMarkdownReport(const ReplayOutcome& outcome, const ReportContext& context) {
  const TraceHeader& h = outcome.header;
  std::string out = fmt::format("# bucketsim compare: {}\n\n", context.trace_name);
  if (!h.description.empty()) out += fmt::format("{}\n\n", h.description);
  out += fmt::format(
      "World size {}, rank {}, {} FSDP instances, {} process groups, {} events over {} "
      "iteration(s); memory model `{}`, backend `{}`.\n\n",
      h.world_size, h.rank, h.fsdp.size(), h.groups.size(), outcome.summary.events,
      outcome.summary.iterations, context.memory_model, context.backend);
  out += "## Policies\n\n" + RenderMarkdown(BuildComparisonTable(outcome));
  for (const RunResult& run : outcome.runs) {
    out += fmt::format("\n## {} (`{}`)\n\n", run.policy, run.canonical);
    out += fmt::format(
        "Peak {} MiB allocated at event {} (iteration {}, {}); peak reserved {} MiB.\n\n",
        Mib(run.peak.allocated_bytes), run.peak.event_index, run.peak.iteration,
        PhaseName(run.peak.phase), Mib(run.peak.reserved_bytes));
    if (const auto& f = run.peak.fragmentation) {
      out += fmt::format(
          "At the allocated peak the allocator holds {} MiB reserved but unallocated: {} MiB in "
          "free pieces of split blocks, the largest free block {} MiB, in {} segment group(s) "
          "by stream and pool.\n\n",
          Mib(f->reserved_minus_allocated_bytes), Mib(f->inactive_split_bytes),
          Mib(f->largest_free_block_bytes), f->segments.size());
    }
    out += RenderMarkdown(BuildPeakCompositionTable(run));
    if (!run.peak.largest.empty()) {
      Table largest;
      largest.headers = {"largest alive at the peak", "category", "MiB", "since event"};
      largest.right_aligned = {false, false, true, true};
      for (const LiveAllocation& a : run.peak.largest) {
        largest.rows.push_back({a.what, std::string(CategoryName(a.category)), Mib(a.bytes),
                                fmt::format("{}", a.since)});
      }
      out += "\n" + RenderMarkdown(largest);
    }
  }
  out +=
      fmt::format("\n## Context\n\n- tool: bucketsim {} ({})\n- trace: {} ({})\n- command: `{}`\n",
                  context.tool_version, context.git_sha, context.trace_name, context.trace_digest,
                  fmt::join(context.argv, " "));
  return out;
}

}  // namespace bucketsim
