#include "report/report_text.h"

#include <fmt/format.h>

#include "report/console_table.h"
#include "report/sweep_report.h"

namespace bucketsim {

std::string TraceSummaryText(const ReportDocument& doc) {
  const ReportTraceInfo& t = doc.trace;
  return fmt::format(
      "World size {}, rank {}, {} FSDP instances, {} process groups, {} events over {} "
      "iteration(s); memory model {}, backend {}.",
      t.world_size, t.rank, t.fsdp_instances, t.process_groups, t.events, t.iterations,
      doc.context.memory_model, doc.context.backend);
}

Recommendation RecommendationOf(const ReportDocument& doc, const SweepSection& choices,
                                ByteUnit unit) {
  Recommendation recommendation;
  if (choices.points.size() < 2) return recommendation;
  recommendation.headline = RecommendationHeadline(choices, unit);
  recommendation.paragraphs = SweepRecommendation(choices, unit);
  if (!recommendation.empty() && doc.context.backend == "sim" &&
      doc.context.time_profile == "none") {
    recommendation.paragraphs.emplace_back(kNoProfileNote);
  }
  return recommendation;
}

std::string AcrossDocumentsText(const std::vector<ReportDocument>& docs, ByteUnit unit) {
  std::vector<std::string> traces;
  std::vector<const SweepSection*> sweeps;
  for (const ReportDocument& doc : docs) {
    if (!doc.sweep) return "";
    traces.push_back(doc.context.trace_name);
    sweeps.push_back(&*doc.sweep);
  }
  return DescribeBudgetAcrossTraces(traces, sweeps, unit);
}

std::string ShownRunsText(const RunSelection& selection) {
  return fmt::format(
      "{} at its own knee (the least peak reserved within {:g}% of its fastest step)",
      Recommended(selection.choices) ? "the recommended run, and each other policy" : "each policy",
      selection.choices.knee.time_tolerance * 100);
}

std::string PeakText(const RunResult& run, ByteUnit unit) {
  return fmt::format("Peak {} allocated at event {} (iteration {}, {}); peak reserved {}.",
                     WithUnit(run.peak.allocated_bytes, unit), run.peak.event_index,
                     run.peak.iteration, PhaseName(run.peak.phase),
                     WithUnit(run.peak.reserved_bytes, unit));
}

std::optional<std::string> FragmentationText(const RunResult& run, ByteUnit unit) {
  const auto& f = run.peak.fragmentation;
  if (!f) return std::nullopt;
  return fmt::format(
      "At the allocated peak the allocator holds {} reserved but unallocated: {} in free "
      "pieces of split blocks, the largest free block {}, in {} segment group(s) by stream and "
      "pool.",
      WithUnit(f->reserved_minus_allocated_bytes, unit), WithUnit(f->inactive_split_bytes, unit),
      WithUnit(f->largest_free_block_bytes, unit), f->segments.size());
}

std::vector<std::pair<std::string, std::string>> ContextItems(const ReportDocument& doc) {
  const ReportContext& c = doc.context;
  std::vector<std::pair<std::string, std::string>> items;
  auto add = [&items](std::string label, std::string value) {
    if (!value.empty()) items.emplace_back(std::move(label), std::move(value));
  };
  std::string tool = c.tool_version.empty() ? std::string() : "bucketsim " + c.tool_version;
  if (!tool.empty() && !c.git_sha.empty()) tool += fmt::format(" ({})", c.git_sha);
  add("tool", tool);
  add("trace", fmt::format("{} ({})", c.trace_name, c.trace_digest));
  add("memory model", c.memory_model);
  add("backend", c.backend);
  add("command", fmt::format("{}", fmt::join(c.argv, " ")));
  add("host", c.host);
  add("report file", doc.source);
  return items;
}

std::string DocumentTitle(const ReportDocument& doc) {
  return fmt::format("{} ({} memory model)", doc.context.trace_name, doc.context.memory_model);
}

std::string PolicyAtCap(std::string_view policy, double bucket_cap_mb) {
  if (bucket_cap_mb <= 0) return std::string(policy);
  return fmt::format("{} @ {:g} MiB", policy, bucket_cap_mb);
}

std::string RunLabel(const std::vector<RunResult>& runs, std::size_t i) {
  for (std::size_t j = 0; j < runs.size(); ++j) {
    if (j != i && runs[j].policy == runs[i].policy) {
      return PolicyAtCap(runs[i].policy, runs[i].bucket_cap_mb);
    }
  }
  return runs[i].policy;
}

std::string PredictionText(const std::vector<PredictionRow>& rows) {
  double lowest = 0;
  double highest = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    double error = PredictionError(rows[i].predicted_step_us, rows[i].measured_step_us);
    lowest = i == 0 ? error : std::min(lowest, error);
    highest = i == 0 ? error : std::max(highest, error);
  }
  return fmt::format(
      "Each policy was also replayed by the sim priced by the profile {}; its step time is "
      "{:+.1f}% to {:+.1f}% off the measured one (predicted / measured - 1; the step is the "
      "median iteration after the first). Exposed and communication time are sums over every "
      "iteration, the first included: measured, it creates the communicators.",
      rows.empty() ? "" : rows.front().profile, 100 * lowest, 100 * highest);
}

}  // namespace bucketsim
