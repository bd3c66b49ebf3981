#include "report/console_table.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/size_format.h"
#include "report/svg_chart.h"

namespace bucketsim {
namespace {

Bytes SumBucket(const CategoryBytes& bytes) {
  return bytes[static_cast<int>(Category::kBucketData)] +
         bytes[static_cast<int>(Category::kBucketOutput)];
}

// Mark names in order of first appearance.
std::vector<std::string> MarkNames(const std::vector<RunResult>& runs) {
  std::vector<std::string> names;
  for (const RunResult& run : runs) {
    for (const MarkSample& mark : run.marks) {
      if (std::find(names.begin(), names.end(), mark.name) == names.end()) {
        names.push_back(mark.name);
      }
    }
  }
  return names;
}

Bytes MaxAtMark(const RunResult& run, const std::string& name) {
  Bytes most = 0;
  for (const MarkSample& mark : run.marks) {
    if (mark.name == name) most = std::max(most, mark.allocated_bytes);
  }
  return most;
}

}  // namespace

std::string DescribeOom(const OomEvent& oom) {
  const OomReport& r = oom.report;
  return fmt::format(
      "out of memory at event {} (a {} {} request on stream {}): tried to allocate {}; {} of "
      "{} free; {} allocated, {} reserved but unallocated in {} free block(s)",
      oom.event_index, FormatBytes(oom.requested_bytes), CategoryName(oom.category), oom.stream,
      FormatBytes(r.tried_to_allocate_bytes), FormatBytes(r.free_bytes),
      FormatBytes(r.capacity_bytes), FormatBytes(r.allocated_bytes),
      FormatBytes(r.reserved_unallocated_bytes), r.free_blocks);
}

std::string DeviceBudgetLine(const DeviceBudget& device) {
  return fmt::format(
      "device: {} ({} B) = {} outside the caching allocator + {} ({} B) for it (--device-memory; "
      "a policy fits when peak reserved + overhead <= the device)",
      FormatBytes(device.device_memory_bytes), device.device_memory_bytes,
      DescribeDeviceOverhead(device.overhead), FormatBytes(device.allocator_capacity_bytes),
      device.allocator_capacity_bytes);
}

std::string OomCell(const OomEvent& oom) {
  return fmt::format("OOM at event {}: {} {} of {} free ({} allocated)", oom.event_index,
                     FormatBytes(oom.requested_bytes), CategoryName(oom.category),
                     FormatBytes(oom.report.free_bytes), FormatBytes(oom.report.allocated_bytes));
}

std::string Ms(Micros us) { return fmt::format("{:.3f}", us / 1000.0); }

std::string Mib(Bytes bytes) { return InUnit(bytes, kMiBUnit); }

Table BuildComparisonTable(const ReplayOutcome& outcome) {
  return BuildComparisonTable(outcome.runs);
}

Table BuildComparisonTable(const std::vector<RunResult>& runs, ByteUnit unit) {
  Table table;
  std::vector<std::string> marks = MarkNames(runs);
  const bool any_oom =
      std::any_of(runs.begin(), runs.end(), [](const RunResult& run) { return run.oom; });
  const std::string_view u = unit.name;
  table.headers = {"policy",
                   "cap (MiB)",
                   fmt::format("peak alloc ({})", u),
                   fmt::format("peak reserved ({})", u),
                   fmt::format("vs best ({})", u),
                   fmt::format("bucket@peak ({})", u),
                   fmt::format("max bucket ({})", u)};
  for (const std::string& mark : marks) table.headers.push_back(fmt::format("{} ({})", mark, u));
  for (const char* h : {"buckets", "flushes", "bypassed", "step (ms)", "exposed (ms)"})
    table.headers.push_back(h);
  if (any_oom) table.headers.push_back("out of memory");
  table.right_aligned.assign(table.headers.size(), true);
  table.right_aligned[0] = false;
  if (any_oom) table.right_aligned.back() = false;

  Bytes best = ~Bytes{0};
  for (const RunResult& run : runs) best = std::min(best, run.peak.allocated_bytes);
  for (const RunResult& run : runs) {
    std::vector<std::string> row = {run.policy,
                                    fmt::format("{}", run.bucket_cap_mb),
                                    InUnit(run.peak.allocated_bytes, unit),
                                    InUnit(run.peak.reserved_bytes, unit),
                                    "+" + InUnit(run.peak.allocated_bytes - best, unit),
                                    InUnit(SumBucket(run.peak.by_category), unit),
                                    InUnit(run.peak_bucket_bytes, unit)};
    for (const std::string& mark : marks) row.push_back(InUnit(MaxAtMark(run, mark), unit));
    row.push_back(fmt::format("{}", run.counters.buckets));
    row.push_back(fmt::format("{}", run.counters.flushes));
    row.push_back(fmt::format("{}", run.counters.bypasses));
    // One iteration, as check's step time: the sum over a trace's iterations (warm-up included)
    // is not a step.
    TimingTotals totals = SumTimings(run.iterations, run.collective_summary.totals());
    row.push_back(run.iterations.empty() ? "-" : Ms(totals.step_time_us));
    row.push_back(run.iterations.empty() ? "-" : Ms(totals.per_iteration.exposed_communication_us));
    if (any_oom) row.push_back(run.oom ? OomCell(*run.oom) : "");
    table.rows.push_back(std::move(row));
  }
  return table;
}

Table BuildTimingTable(const ReplayOutcome& outcome) {
  Table table;
  table.headers = {"policy",         "backend",           "step (ms)",          "compute/iter (ms)",
                   "comm/iter (ms)", "exposed/iter (ms)", "exposed total (ms)", "copy/iter (ms)",
                   "collectives",    "busbw (GB/s)",      "verified",           "communicators"};
  table.right_aligned.assign(table.headers.size(), true);
  table.right_aligned[0] = false;
  table.right_aligned[1] = false;
  for (const RunResult& run : outcome.runs) {
    TimingTotals totals = SumTimings(run.iterations, run.collective_summary.totals());
    const IterationTiming& one = totals.per_iteration;
    const ExecutionFacts& facts = run.execution;
    std::string verified = !facts.verified ? "no"
                           : facts.verify_failures == 0
                               ? fmt::format("{} ok", facts.verified_collectives)
                               : fmt::format("{} FAILED", facts.verify_failures);
    table.rows.push_back({run.policy, facts.emulated ? run.backend + " (emulated)" : run.backend,
                          Ms(totals.step_time_us), Ms(one.compute_us), Ms(one.communication_us),
                          Ms(one.exposed_communication_us), Ms(totals.exposed_communication_us),
                          Ms(one.copy_us), fmt::format("{}", run.collective_summary.totals().count),
                          fmt::format("{:.2f}", totals.busbw_GBps), verified,
                          fmt::format("{}", facts.communicators)});
  }
  return table;
}

Table BuildPredictionTable(const std::vector<PredictionRow>& rows) {
  Table table;
  table.headers = {"policy",         "step (ms)",         "predicted (ms)",
                   "error",          "exposed/iter (ms)", "predicted (ms)",
                   "comm/iter (ms)", "predicted (ms)"};
  table.right_aligned.assign(table.headers.size(), true);
  table.right_aligned[0] = false;
  auto ms = [](Micros us) { return fmt::format("{:.3f}", us / 1000.0); };
  for (const PredictionRow& row : rows) {
    table.rows.push_back({row.policy, ms(row.measured_step_us), ms(row.predicted_step_us),
                          fmt::format("{:+.1f}%", 100 * PredictionError(row.predicted_step_us,
                                                                        row.measured_step_us)),
                          ms(row.measured_exposed_us), ms(row.predicted_exposed_us),
                          ms(row.measured_communication_us), ms(row.predicted_communication_us)});
  }
  return table;
}

Table BuildPeakCompositionTable(const RunResult& run, ByteUnit unit) {
  Table table;
  table.headers = {"category", fmt::format("bytes at peak ({})", unit.name), "share"};
  table.right_aligned = {false, true, true};
  for (int c = 0; c < kNumCategories; ++c) {
    Bytes bytes = run.peak.by_category[c];
    if (bytes == 0) continue;
    double share =
        run.peak.allocated_bytes == 0
            ? 0.0
            : 100.0 * static_cast<double>(bytes) / static_cast<double>(run.peak.allocated_bytes);
    table.rows.push_back({std::string(CategoryName(static_cast<Category>(c))), InUnit(bytes, unit),
                          fmt::format("{:.1f}%", share)});
  }
  return table;
}

Table BuildLargestAtPeakTable(const RunResult& run, ByteUnit unit) {
  Table table;
  table.headers = {"largest alive at the peak", "category", std::string(unit.name), "since event"};
  table.right_aligned = {false, false, true, true};
  for (const LiveAllocation& a : run.peak.largest) {
    table.rows.push_back({a.what, std::string(CategoryName(a.category)), InUnit(a.bytes, unit),
                          fmt::format("{}", a.since)});
  }
  return table;
}

std::string RenderText(const Table& table, std::size_t max_width) {
  constexpr std::size_t kGap = 2;
  std::vector<std::size_t> width(table.headers.size());
  for (std::size_t c = 0; c < width.size(); ++c) width[c] = table.headers[c].size();
  for (const auto& row : table.rows) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  // The blocks: the key columns, then as many of the others as fit (all of them without a limit).
  const std::size_t keys = std::min(table.key_columns, width.size());
  std::size_t key_width = 0;
  for (std::size_t c = 0; c < keys; ++c) key_width += (c > 0 ? kGap : 0) + width[c];
  std::vector<std::vector<std::size_t>> blocks(1);
  std::size_t used = key_width;
  for (std::size_t c = keys; c < width.size(); ++c) {
    if (max_width > 0 && !blocks.back().empty() && used + kGap + width[c] > max_width) {
      blocks.emplace_back();
      used = key_width;
    }
    used += (used > 0 ? kGap : 0) + width[c];
    blocks.back().push_back(c);
  }
  auto line = [&](const std::vector<std::string>& cells, const std::vector<std::size_t>& block) {
    std::string out;
    auto add = [&](std::size_t c) {
      if (!out.empty()) out += std::string(kGap, ' ');
      const std::string& cell = c < cells.size() ? cells[c] : std::string();
      out += table.right_aligned[c] ? fmt::format("{:>{}}", cell, width[c])
                                    : fmt::format("{:<{}}", cell, width[c]);
    };
    for (std::size_t c = 0; c < keys; ++c) add(c);
    for (std::size_t c : block) add(c);
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out;
  for (const std::vector<std::size_t>& block : blocks) {
    if (!out.empty()) out += "\n";
    out += line(table.headers, block);
    for (const auto& row : table.rows) out += line(row, block);
  }
  return out;
}

std::string WrapText(std::string_view text, std::size_t width) {
  std::string out;
  std::size_t line_start = 0;
  while (line_start <= text.size()) {
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    std::size_t column = 0;
    for (std::size_t at = line_start; at < line_end;) {
      const std::size_t start = text.find_first_not_of(' ', at);
      if (start == std::string_view::npos || start >= line_end) break;
      const std::size_t end = std::min(text.find(' ', start), line_end);
      if (column > 0 && width > 0 && column + 1 + (end - start) > width) {
        out += '\n';
        column = 0;
      }
      if (column > 0) {
        out += ' ';
        ++column;
      }
      out += text.substr(start, end - start);
      column += end - start;
      at = end;
    }
    out += '\n';
    if (line_end == text.size()) break;
    line_start = line_end + 1;
  }
  return out;
}

std::string RenderMarkdown(const Table& table) {
  std::string out = "|";
  for (const std::string& h : table.headers) out += fmt::format(" {} |", h);
  out += "\n|";
  for (bool right : table.right_aligned) out += right ? " ---: |" : " --- |";
  out += "\n";
  for (const auto& row : table.rows) {
    out += "|";
    for (const std::string& cell : row) out += fmt::format(" {} |", cell);
    out += "\n";
  }
  return out;
}

std::string RenderHtml(const Table& table) {
  auto cell = [&table](const char* tag, std::size_t c, const std::string& text) {
    const bool wrapped = c < table.wrapped.size() && table.wrapped[c];
    return fmt::format("<{}{}>{}</{}>", tag,
                       table.right_aligned[c] ? " class=\"num\""
                       : wrapped              ? " class=\"wrap\""
                                              : "",
                       XmlEscape(text), tag);
  };
  std::string out = "<table>\n<thead><tr>";
  for (std::size_t c = 0; c < table.headers.size(); ++c) out += cell("th", c, table.headers[c]);
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& row : table.rows) {
    out += "<tr>";
    for (std::size_t c = 0; c < row.size(); ++c) out += cell("td", c, row[c]);
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

}  // namespace bucketsim
