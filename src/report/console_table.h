// The comparison of policies as a table: one row per policy, units in the headers. The same
// Table renders as aligned text for the terminal and as Markdown for documents, so the two never
// disagree about a figure.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/replay_policies.h"
#include "report/byte_unit.h"
#include "report/report_document.h"

namespace bucketsim {

struct Table {
  std::vector<std::string> headers;
  std::vector<bool> right_aligned;
  std::vector<std::vector<std::string>> rows;
  // The leading columns that name a row (the policy): repeated in every block of a table that
  // RenderText splits to fit a width.
  std::size_t key_columns = 1;
  // Columns of long text (a framework's setting) that a page breaks anywhere to fit its width,
  // where other cells keep their line; empty: none.
  std::vector<bool> wrapped;
};

// Memory figures are in `unit` (the terminal's MiB; a page's PageUnit), the cap in MiB always.
// Columns: policy, cap, peak allocated, peak reserved, delta to the lowest peak, bucket bytes at
// the peak, largest bucket bytes, the largest value of each named mark, buckets, flushes, bypassed
// requests, step time and exposed communication of one iteration (as check's step time), and,
// when a run ran out of --device-memory, where (every other column stops at that event).
Table BuildComparisonTable(const ReplayOutcome& outcome);
Table BuildComparisonTable(const std::vector<RunResult>& runs, ByteUnit unit = kMiBUnit);
// Time per policy on the backend that ran it: step time, and per iteration compute,
// communication, exposed communication (its total over the trace beside it) and copies;
// collectives with their bus bandwidth, and what was verified.
Table BuildTimingTable(const ReplayOutcome& outcome);
// run --profile on a real backend: measured against predicted step time (median after the first
// iteration) with its error (predicted / measured - 1), and exposed communication and
// communication time per iteration (TimingTotals::per_iteration).
Table BuildPredictionTable(const std::vector<PredictionRow>& rows);
// The composition of one policy's peak: bytes per non-empty category.
Table BuildPeakCompositionTable(const RunResult& run, ByteUnit unit = kMiBUnit);
// The largest allocations alive at one policy's peak (empty rows when it listed none).
Table BuildLargestAtPeakTable(const RunResult& run, ByteUnit unit = kMiBUnit);

// Aligned text. A table wider than `width` (0: no limit) is split into blocks of whole columns,
// one after another, each repeating the key columns and fitting the width where one column can
// (a column wider than the width on its own gets a block of its own).
std::string RenderText(const Table& table, std::size_t width = 0);
// `text` broken at spaces into lines of at most `width` columns (0: no limit; a word longer than
// the width stands on a line of its own); each line ends in a newline.
std::string WrapText(std::string_view text, std::size_t width);
std::string RenderMarkdown(const Table& table);
// An HTML <table>, cells escaped; right-aligned columns get class "num", wrapped ones "wrap".
std::string RenderHtml(const Table& table);

// "out of memory at event N (...): ..." for a run that ran out of device memory.
std::string DescribeOom(const OomEvent& oom);
// "device: 80.00 GiB (85899345920 B) = 1.07 GiB (CUDA context ... ) outside the caching
// allocator + 78.93 GiB (... B) for it (--device-memory)".
std::string DeviceBudgetLine(const DeviceBudget& device);
// The same in a table cell: "OOM at event N: 1.00 GiB param of 80 B free (0 B allocated)".
std::string OomCell(const OomEvent& oom);

// Milliseconds with three decimals, the time unit of every table.
std::string Ms(Micros us);

// MiB with two decimals, the unit of every terminal table (InUnit(bytes, kMiBUnit)).
std::string Mib(Bytes bytes);

}  // namespace bucketsim
