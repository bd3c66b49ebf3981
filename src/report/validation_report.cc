#include "report/validation_report.h"

#include <fmt/format.h>

#include "core/size_format.h"
#include "report/json_writer.h"

namespace bucketsim {
namespace {

std::string DescribeSegment(const std::optional<SegmentRecord>& r) {
  if (!r) return "nothing";
  return fmt::format("{} {} on stream {}", SegmentActionName(r->action), FormatBytes(r->bytes),
                     r->stream);
}

void WriteSegment(JsonWriter& w, std::string_view key, const std::optional<SegmentRecord>& r) {
  w.Key(key);
  if (!r) {
    w.Null();
    return;
  }
  w.BeginObject();
  w.Field("action", SegmentActionName(r->action));
  w.Field("bytes", r->bytes);
  w.Field("stream", r->stream);
  w.Field("address", r->address);
  w.EndObject();
}

template <typename T>
void OptionalField(JsonWriter& w, std::string_view key, const std::optional<T>& value) {
  w.Key(key);
  if (value) {
    w.Value(*value);
  } else {
    w.Null();
  }
}

std::string Percent(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? "-"
                    : fmt::format("{:.1f}%",
                                  100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

std::string SnapshotTable(const ValidationReport& report) {
  const SnapshotAgreement& a = *report.snapshot;
  std::string out =
      fmt::format("  imported snapshot: {} observed events; caching model alloc conf '{}'\n",
                  a.observed_events, report.alloc_conf);
  out += fmt::format(
      "  allocated bytes (exact model = snapshot's sizes rounded to 512 B): {} of {} "
      "events agree",
      a.allocated_events_matching, a.allocated_events_checked);
  if (a.first_allocated_mismatch) {
    const AllocatedMismatch& m = *a.first_allocated_mismatch;
    out += fmt::format("; first difference at event {}: replayed {}, snapshot {}", m.event_index,
                       m.replayed_bytes, m.expected_bytes);
  }
  out += "\n";
  if (a.observed_totals) {
    const ObservedTotals& t = *a.observed_totals;
    out += fmt::format(
        "  at the dump: requested {} (alive in the trace: {}), allocated {} (exact model {}, "
        "caching model {}), reserved {} (caching model {})\n",
        t.requested_bytes, a.final_requested_bytes, t.allocated_bytes,
        a.exact_final_allocated_bytes, a.predicted_final_allocated_bytes, t.reserved_bytes,
        a.predicted_final_reserved_bytes);
  }
  out += fmt::format(
      "  segment events (caching model vs snapshot): {} predicted, {} observed, {} match ({})\n",
      a.predicted_segment_events, a.observed_segment_events, a.matching_segment_events,
      Percent(a.matching_segment_events,
              std::max(a.predicted_segment_events, a.observed_segment_events)));
  if (a.first_divergence) {
    const SegmentDivergence& d = *a.first_divergence;
    out += fmt::format(
        "  first divergence at event {} (segment event {} there): predicted {}, "
        "observed {}\n",
        d.event_index, d.position, DescribeSegment(d.predicted), DescribeSegment(d.observed));
  } else {
    out += "  no divergence\n";
  }
  out += fmt::format(
      "  reserved: peak predicted {} / observed {}; at the end predicted {} / observed {}\n",
      FormatBytes(a.predicted_peak_reserved_bytes), FormatBytes(a.observed_peak_reserved_bytes),
      FormatBytes(a.predicted_final_reserved_bytes), FormatBytes(a.observed_final_reserved_bytes));
  if (a.observed_ooms > 0 || a.predicted_oom) {
    out += fmt::format("  out of memory: observed {} (first at event {}), predicted {}\n",
                       a.observed_ooms,
                       a.first_observed_oom ? fmt::format("{}", *a.first_observed_oom) : "-",
                       a.predicted_oom ? fmt::format("at event {}", *a.predicted_oom) : "none");
  }
  return out;
}

void SnapshotJson(JsonWriter& w, const ValidationReport& report) {
  const SnapshotAgreement& a = *report.snapshot;
  w.Key("snapshot");
  w.BeginObject();
  w.Field("observed_events", a.observed_events);
  w.Field("alloc_conf", report.alloc_conf);
  w.Field("accounting_agrees", !report.accounting_disagrees);
  w.Key("allocated");
  w.BeginObject();
  w.Field("events_checked", a.allocated_events_checked);
  w.Field("events_matching", a.allocated_events_matching);
  w.Key("first_mismatch");
  if (a.first_allocated_mismatch) {
    w.BeginObject();
    w.Field("event_index", a.first_allocated_mismatch->event_index);
    w.Field("replayed_bytes", a.first_allocated_mismatch->replayed_bytes);
    w.Field("expected_bytes", a.first_allocated_mismatch->expected_bytes);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Field("exact_final_bytes", a.exact_final_allocated_bytes);
  w.Field("predicted_final_bytes", a.predicted_final_allocated_bytes);
  w.Field("final_requested_bytes", a.final_requested_bytes);
  w.EndObject();
  w.Key("observed_totals");
  if (a.observed_totals) {
    w.BeginObject();
    w.Field("allocated_bytes", a.observed_totals->allocated_bytes);
    w.Field("reserved_bytes", a.observed_totals->reserved_bytes);
    w.Field("requested_bytes", a.observed_totals->requested_bytes);
    w.Field("active_bytes", a.observed_totals->active_bytes);
    w.EndObject();
  } else {
    w.Null();
  }
  w.Key("segments");
  w.BeginObject();
  w.Field("predicted", a.predicted_segment_events);
  w.Field("observed", a.observed_segment_events);
  w.Field("matching", a.matching_segment_events);
  w.Key("first_divergence");
  if (a.first_divergence) {
    w.BeginObject();
    w.Field("event_index", a.first_divergence->event_index);
    w.Field("position", a.first_divergence->position);
    WriteSegment(w, "predicted", a.first_divergence->predicted);
    WriteSegment(w, "observed", a.first_divergence->observed);
    w.EndObject();
  } else {
    w.Null();
  }
  w.EndObject();
  w.Key("reserved");
  w.BeginObject();
  w.Field("predicted_peak_bytes", a.predicted_peak_reserved_bytes);
  w.Field("observed_peak_bytes", a.observed_peak_reserved_bytes);
  w.Field("predicted_final_bytes", a.predicted_final_reserved_bytes);
  w.Field("observed_final_bytes", a.observed_final_reserved_bytes);
  w.EndObject();
  w.Key("oom");
  w.BeginObject();
  w.Field("observed", a.observed_ooms);
  OptionalField(w, "first_observed_event", a.first_observed_oom);
  OptionalField(w, "predicted_event", a.predicted_oom);
  w.EndObject();
  w.EndObject();
}

}  // namespace

std::string ValidationTable(const ValidationReport& report) {
  const TraceHeader& header = *report.header;
  const TraceSummary& summary = *report.summary;
  const std::uint64_t problems = summary.num_inconsistencies();
  std::string out = fmt::format(
      "{}: {} (schema_version {})\n  world size {}, rank {}, bucket_cap_mb {}, {} "
      "stream(s), {} process group(s), {} FSDP instance(s)\n  {} events, {} iteration(s), "
      "compute {:.3f} ms\n  events by kind:",
      report.path, problems == 0 ? "consistent trace" : "INCONSISTENT trace", header.schema_version,
      header.world_size, header.rank, header.bucket_cap_mb, header.streams.size(),
      header.groups.size(), header.units.size(), summary.events, summary.iterations,
      summary.compute_us / 1000.0);
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
  if (problems > 0) {
    out += fmt::format("  {} inconsistent event(s), not replayed:\n", problems);
    for (const InconsistencyCount& c : summary.inconsistencies) {
      std::string events;
      for (EventIndex i : c.first_events)
        events += fmt::format("{}{}", events.empty() ? "" : ", ", i);
      out += fmt::format("  {:<26} {:>8}  first at event(s) {}{}: {}\n", InconsistencyName(c.kind),
                         c.count, events, c.count > c.first_events.size() ? ", ..." : "",
                         c.first_message);
    }
  }
  if (report.snapshot) out += SnapshotTable(report);
  return out;
}

std::string ValidationJson(const ValidationReport& report) {
  const TraceHeader& header = *report.header;
  const TraceSummary& summary = *report.summary;
  JsonWriter w;
  w.BeginObject();
  w.Field("report", "validate");
  w.Field("schema_version", 1);
  w.Field("trace", report.path);
  w.Field("trace_schema_version", header.schema_version);
  w.Field("consistent", summary.num_inconsistencies() == 0 && !report.accounting_disagrees);
  w.Field("events", summary.events);
  w.Key("events_by_kind");
  w.BeginObject();
  for (int k = 0; k < kNumEventKinds; ++k) {
    w.Field(EventKindName(static_cast<EventKind>(k)), summary.events_by_kind[k]);
  }
  w.EndObject();
  w.Field("iterations", summary.iterations);
  w.Field("max_live_bytes", summary.max_live_bytes);
  w.Field("max_live_allocations", summary.max_live_allocations);
  w.Key("by_category");
  w.BeginObject();
  for (int c = 0; c < kNumTraceCategories; ++c) {
    w.Key(CategoryName(static_cast<Category>(c)));
    w.BeginObject();
    w.Field("allocated_bytes", summary.allocated_bytes[c]);
    w.Field("alive_at_end_bytes", summary.alive_at_end_bytes[c]);
    w.Field("alive_at_end_count", summary.alive_at_end_count[c]);
    w.EndObject();
  }
  w.EndObject();
  w.Key("inconsistencies");
  w.BeginArray();
  for (const InconsistencyCount& c : summary.inconsistencies) {
    w.BeginObject();
    w.Field("kind", InconsistencyName(c.kind));
    w.Field("count", c.count);
    w.Key("first_events");
    w.BeginArray();
    for (EventIndex i : c.first_events) w.Uint(i);
    w.EndArray();
    w.Field("first_message", c.first_message);
    w.EndObject();
  }
  w.EndArray();
  if (report.snapshot) {
    SnapshotJson(w, report);
  } else {
    w.Key("snapshot");
    w.Null();
  }
  w.EndObject();
  return w.Finish();
}

}  // namespace bucketsim
