#include "report/json_report.h"

#include <cstdio>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "report/json_writer.h"
#include "report/sweep_report.h"

namespace bucketsim {
namespace {

// Where a policy's entry stands in a report: the top-level object, then its `policies` array.
constexpr std::size_t kFragmentDepth = 2;

void WriteCategories(JsonWriter& w, std::string_view key, const CategoryBytes& bytes) {
  w.Key(key);
  w.BeginObject();
  for (int c = 0; c < kNumCategories; ++c) {
    w.Field(CategoryName(static_cast<Category>(c)), bytes[c]);
  }
  w.EndObject();
}

Bytes SumIf(const CategoryBytes& bytes, bool (*predicate)(Category)) {
  Bytes total = 0;
  for (int c = 0; c < kNumCategories; ++c) {
    if (predicate(static_cast<Category>(c))) total += bytes[c];
  }
  return total;
}

void WriteTrace(JsonWriter& w, const ReportTraceInfo& trace) {
  w.Key("trace");
  w.BeginObject();
  w.Field("schema_version", trace.schema_version);
  w.Field("description", trace.description);
  w.Field("world_size", trace.world_size);
  w.Field("rank", trace.rank);
  w.Field("bucket_cap_mb", trace.bucket_cap_mb);
  w.Field("events", trace.events);
  w.Field("iterations", trace.iterations);
  w.Field("fsdp_instances", trace.fsdp_instances);
  w.Field("params", trace.params);
  w.Field("process_groups", trace.process_groups);
  w.Field("compute_us", trace.compute_us);
  w.EndObject();
}

void WriteFragmentation(JsonWriter& w, const std::optional<FragmentationInfo>& info) {
  w.Key("fragmentation");
  if (!info) {
    w.Null();
    return;
  }
  w.BeginObject();
  w.Field("reserved_minus_allocated_bytes", info->reserved_minus_allocated_bytes);
  w.Field("inactive_split_bytes", info->inactive_split_bytes);
  w.Field("largest_free_block_bytes", info->largest_free_block_bytes);
  w.Key("segments");
  w.BeginArray();
  for (const FragmentationInfo::Segments& s : info->segments) {
    w.BeginObject();
    w.Field("stream", s.stream);
    w.Field("pool", s.small_pool ? "small" : "large");
    w.Field("count", s.count);
    w.Field("bytes", s.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WritePeak(JsonWriter& w, const PeakInfo& peak) {
  w.Key("peak");
  w.BeginObject();
  w.Field("event_index", peak.event_index);
  w.Field("iteration", peak.iteration);
  w.Field("phase", PhaseName(peak.phase));
  WriteCategories(w, "by_category", peak.by_category);
  w.Key("largest");
  w.BeginArray();
  for (const LiveAllocation& a : peak.largest) {
    w.BeginObject();
    w.Field("category", CategoryName(a.category));
    w.Field("bytes", a.bytes);
    w.Field("what", a.what);
    w.Field("since_event", a.since);
    w.EndObject();
  }
  w.EndArray();
  WriteFragmentation(w, peak.fragmentation);
  w.EndObject();
}

void WriteMarks(JsonWriter& w, const std::vector<MarkSample>& marks) {
  w.Key("marks");
  w.BeginArray();
  for (const MarkSample& m : marks) {
    w.BeginObject();
    w.Field("name", m.name);
    w.Field("iteration", m.iteration);
    w.Field("event_index", m.event_index);
    w.Field("allocated_bytes", m.allocated_bytes);
    w.Field("reserved_bytes", m.reserved_bytes);
    WriteCategories(w, "by_category", m.by_category);
    w.EndObject();
  }
  w.EndArray();
}

void WritePhases(JsonWriter& w, const std::vector<PhaseStats>& phases) {
  w.Key("phases");
  w.BeginArray();
  for (const PhaseStats& p : phases) {
    w.BeginObject();
    w.Field("iteration", p.iteration);
    w.Field("phase", PhaseName(p.phase));
    w.Field("first_event", p.first_event);
    w.Field("end_event", p.end_event);
    w.Field("start_bytes", p.start_bytes);
    w.Field("peak_bytes", p.peak_bytes);
    w.Field("end_bytes", p.end_bytes);
    w.Field("peak_reserved_bytes", p.peak_reserved_bytes);
    w.Field("compute_us", p.compute_us);
    w.EndObject();
  }
  w.EndArray();
}

void WriteOptionalIndex(JsonWriter& w, std::string_view key, std::optional<EventIndex> index) {
  w.Key(key);
  if (index) {
    w.Uint(*index);
  } else {
    w.Null();
  }
}

void WriteTimeline(JsonWriter& w, const MemoryTimelineData& timeline) {
  w.Key("timeline");
  w.BeginObject();
  w.Field("span_events", timeline.span_events);
  w.Key("points");
  w.BeginArray();
  for (const TimelinePoint& p : timeline.points) {
    w.BeginObject();
    w.Field("first_event", p.first_event);
    w.Field("allocated_bytes", p.allocated_bytes);
    w.Field("reserved_bytes", p.reserved_bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteBucketLifetimes(JsonWriter& w, const RunResult& run) {
  w.Key("bucket_lifetimes");
  w.BeginArray();
  for (const BucketLifetime& b : run.bucket_lifetimes) {
    w.BeginObject();
    w.Field("category", CategoryName(b.category));
    w.Field("dtype", DTypeName(b.dtype));
    w.Field("group", b.group);
    w.Field("bytes", b.bytes);
    w.Field("allocated_event", b.allocated_event);
    WriteOptionalIndex(w, "retired_event", b.retired_event);
    WriteOptionalIndex(w, "freed_event", b.freed_event);
    w.EndObject();
  }
  w.EndArray();
  w.Field("bucket_lifetimes_dropped", run.bucket_lifetimes_dropped);
}

void WriteCount(JsonWriter& w, std::string_view key, const CollectiveCount& count) {
  w.Key(key);
  w.BeginObject();
  w.Field("count", count.count);
  w.Field("bytes", count.bytes);
  w.EndObject();
}

void WriteCollectiveSummary(JsonWriter& w, const CollectiveSummary& summary) {
  w.Key("collective_summary");
  w.BeginObject();
  w.Field("count", summary.totals().count);
  w.Field("bytes", summary.totals().bytes);
  w.Key("phases");
  w.BeginArray();
  for (const PhaseCollectives& p : summary.phases()) {
    w.BeginObject();
    w.Field("iteration", p.iteration);
    w.Field("phase", PhaseName(p.phase));
    w.Field("count", p.total.count);
    w.Field("bytes", p.total.bytes);
    for (int k = 0; k < kNumCollectiveKinds; ++k) {
      WriteCount(w, CollectiveKindName(static_cast<CollectiveKind>(k)), p.by_kind[k]);
    }
    w.EndObject();
  }
  w.EndArray();
  w.Key("groups");
  w.BeginArray();
  for (const GroupCollectives& g : summary.groups()) {
    w.BeginObject();
    w.Field("group", g.group);
    w.Field("group_size", g.group_size);
    w.Field("count", g.total.count);
    w.Field("bytes", g.total.bytes);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
}

void WriteCollectives(JsonWriter& w, const std::vector<CollectiveRecord>& collectives) {
  w.Key("collectives");
  w.BeginArray();
  for (const CollectiveRecord& c : collectives) {
    w.BeginObject();
    w.Field("kind", CollectiveKindName(c.kind));
    w.Field("group", c.group);
    w.Field("group_size", c.group_size);
    w.Field("dtype", DTypeName(c.dtype));
    w.Field("input_numel", c.input_numel);
    w.Field("output_numel", c.output_numel);
    w.Field("requests", c.requests);
    w.Field("event_index", c.event_index);
    Bytes bytes = SendBytes(c);
    w.Field("bytes", bytes);
    w.Field("start_us", c.start_us);
    w.Field("dur_us", c.dur_us);
    w.Field("algbw_GBps", AlgBandwidthGBps(bytes, c.dur_us));
    w.Field("busbw_GBps", BusBandwidthGBps(bytes, c.dur_us, c.group_size, c.kind));
    w.EndObject();
  }
  w.EndArray();
}

void WriteOptionalBytes(JsonWriter& w, std::string_view key, const std::optional<Bytes>& value) {
  w.Key(key);
  if (value) {
    w.Value(*value);
  } else {
    w.Null();
  }
}

// --device-memory only (absent without a device, so that reports without one stay as they were):
// the device, what of it is outside the caching allocator, and peak reserved + that.
void WriteDevice(JsonWriter& w, const RunResult& run) {
  if (!run.device) return;
  const DeviceOverhead& overhead = run.device->overhead;
  auto estimated = [&overhead](Bytes bytes) {
    return overhead.given_bytes ? std::nullopt : std::optional<Bytes>(bytes);
  };
  w.Key("device");
  w.BeginObject();
  w.Field("device_memory_bytes", run.device->device_memory_bytes);
  w.Field("overhead_bytes", overhead.total_bytes());
  w.Field("overhead_source", overhead.given_bytes ? "--device-overhead" : "estimate");
  WriteOptionalBytes(w, "cuda_context_bytes", estimated(overhead.cuda_context_bytes));
  WriteOptionalBytes(w, "nccl_buffer_bytes", estimated(overhead.nccl_buffer_bytes));
  WriteOptionalBytes(w, "nccl_communicators",
                     estimated(static_cast<Bytes>(overhead.nccl_communicators)));
  w.Field("allocator_capacity_bytes", run.device->allocator_capacity_bytes);
  w.Field("peak_device_bytes", run.peak.reserved_bytes + overhead.total_bytes());
  w.Field("fits", !run.oom);
  w.EndObject();
}

void WriteOom(JsonWriter& w, const std::optional<OomEvent>& oom) {
  w.Key("oom");
  if (!oom) {
    w.Null();
    return;
  }
  w.BeginObject();
  w.Field("event_index", oom->event_index);
  w.Field("requested_bytes", oom->requested_bytes);
  w.Field("stream", oom->stream);
  w.Field("category", CategoryName(oom->category));
  w.Field("tried_to_allocate_bytes", oom->report.tried_to_allocate_bytes);
  w.Field("capacity_bytes", oom->report.capacity_bytes);
  w.Field("free_bytes", oom->report.free_bytes);
  w.Field("allocated_bytes", oom->report.allocated_bytes);
  w.Field("reserved_unallocated_bytes", oom->report.reserved_unallocated_bytes);
  w.Field("free_blocks", oom->report.free_blocks);
  w.EndObject();
}

void WriteAllocatorTotals(JsonWriter& w, const std::optional<AllocatorTotals>& totals) {
  w.Key("allocator");
  if (!totals) {
    w.Null();
    return;
  }
  w.BeginObject();
  w.Field("peak_active_bytes", totals->peak_active_bytes);
  w.Field("peak_inactive_split_bytes", totals->peak_inactive_split_bytes);
  w.Field("peak_segments", totals->peak_segments);
  w.Field("num_alloc_retries", totals->num_alloc_retries);
  w.Field("num_ooms", totals->num_ooms);
  w.EndObject();
}

void WriteTiming(JsonWriter& w, const RunResult& run) {
  w.Key("timing");
  w.BeginObject();
  w.Field("backend", run.backend);
  TimingTotals totals = SumTimings(run.iterations, run.collective_summary.totals());
  w.Field("step_time_us", totals.step_time_us);
  w.Field("iteration_us", totals.iteration_us);
  w.Field("compute_us", totals.compute_us);
  w.Field("communication_us", totals.communication_us);
  w.Field("copy_us", totals.copy_us);
  w.Field("exposed_communication_us", totals.exposed_communication_us);
  w.Field("communication_per_iteration_us", totals.per_iteration.communication_us);
  w.Field("exposed_communication_per_iteration_us", totals.per_iteration.exposed_communication_us);
  w.Field("collective_bytes", totals.collective_bytes);
  w.Field("algbw_GBps", totals.algbw_GBps);
  w.Field("busbw_GBps", totals.busbw_GBps);
  w.Key("iterations");
  w.BeginArray();
  for (const IterationTiming& it : run.iterations) {
    w.BeginObject();
    w.Field("iteration", it.iteration);
    w.Field("iteration_us", it.iteration_us);
    w.Field("compute_us", it.compute_us);
    w.Field("communication_us", it.communication_us);
    w.Field("copy_us", it.copy_us);
    w.Field("exposed_communication_us", it.exposed_communication_us);
    w.EndObject();
  }
  w.EndArray();
  w.Key("prediction");
  if (!run.prediction) {
    w.Null();
  } else {
    TimingTotals predicted =
        SumTimings(run.prediction->iterations, run.collective_summary.totals());
    w.BeginObject();
    w.Field("profile", run.prediction->profile);
    w.Field("step_time_us", predicted.step_time_us);
    w.Field("iteration_us", predicted.iteration_us);
    w.Field("compute_us", predicted.compute_us);
    w.Field("communication_us", predicted.communication_us);
    w.Field("copy_us", predicted.copy_us);
    w.Field("exposed_communication_us", predicted.exposed_communication_us);
    w.Field("communication_per_iteration_us", predicted.per_iteration.communication_us);
    w.Field("exposed_communication_per_iteration_us",
            predicted.per_iteration.exposed_communication_us);
    w.Field("step_time_error", PredictionError(predicted.step_time_us, totals.step_time_us));
    w.EndObject();
  }
  w.EndObject();
}

void WriteIndexList(JsonWriter& w, std::string_view key, const std::vector<std::size_t>& list) {
  w.Key(key);
  w.BeginArray();
  for (std::size_t i : list) w.Uint(i);
  w.EndArray();
}

void WriteSweep(JsonWriter& w, const SweepSection& sweep) {
  w.Key("sweep");
  w.BeginObject();
  w.Key("points");
  w.BeginArray();
  for (const SweepPoint& p : sweep.points) {
    w.BeginObject();
    w.Field("policy", p.policy);
    w.Field("canonical", p.canonical);
    w.Field("bucket_cap_mb", p.bucket_cap_mb);
    w.Field("bucketed_requests", p.bucketed_requests);
    w.Field("bypassed_requests", p.bypassed_requests);
    w.Field("peak_allocated_bytes", p.peak_allocated_bytes);
    w.Field("peak_reserved_bytes", p.peak_reserved_bytes);
    w.Field("step_time_us", p.step_time_us);
    w.Field("exposed_communication_us", p.exposed_communication_us);
    w.Field("out_of_memory", p.out_of_memory);
    w.Field("pareto", p.pareto);
    w.EndObject();
  }
  w.EndArray();
  w.Key("knee");
  w.BeginObject();
  w.Field("time_tolerance", sweep.knee.time_tolerance);
  WriteOptionalIndex(w, "fastest", sweep.knee.fastest);
  WriteOptionalIndex(w, "knee", sweep.knee.knee);
  WriteIndexList(w, "ties", sweep.knee.ties);
  w.EndObject();
  w.Key("budget");
  if (!sweep.budget) {
    w.Null();
  } else {
    w.BeginObject();
    w.Field("budget_bytes", sweep.budget->budget_bytes);
    WriteOptionalIndex(w, "best", sweep.budget->best);
    WriteOptionalIndex(w, "runner_up", sweep.budget->runner_up);
    WriteOptionalIndex(w, "smallest", sweep.budget->smallest);
    WriteIndexList(w, "ties", sweep.budget->ties);
    w.EndObject();
  }
  w.Key("search");
  if (!sweep.search) {
    w.Null();
  } else {
    w.BeginObject();
    w.Field("from_mb", sweep.search->from_mb);
    w.Field("to_mb", sweep.search->to_mb);
    w.Field("passes", sweep.search->passes);
    w.Field("caps", sweep.search->caps);
    w.Key("listed_mb");
    w.BeginArray();
    for (double cap : sweep.search->listed_mb) w.Double(cap);
    w.EndArray();
    w.EndObject();
  }
  w.Key("smallest_bucketing_cap_mb");
  if (sweep.smallest_bucketing_cap_mb) {
    w.Double(*sweep.smallest_bucketing_cap_mb);
  } else {
    w.Null();
  }
  std::optional<std::size_t> recommended = Recommended(sweep);
  WriteOptionalIndex(w, "recommended", recommended);
  w.Key("setting");
  if (!recommended) {
    w.Null();
  } else {
    const SettingAdvice setting = RecommendedSetting(sweep);
    w.BeginObject();
    w.Field("framework", setting.framework);
    w.Field("setting", setting.setting);
    w.Field("upstream", setting.upstream);
    w.Field("note", setting.note);
    w.EndObject();
  }
  w.Key("advice");
  w.BeginArray();
  for (const std::string& paragraph : SweepAdvice(sweep)) w.String(paragraph);
  w.EndArray();
  w.EndObject();
}

void WriteExecution(JsonWriter& w, const ExecutionFacts& facts) {
  w.Key("execution");
  w.BeginObject();
  w.Field("ranks", facts.ranks);
  w.Field("rank", facts.rank);
  w.Field("emulated", facts.emulated);
  w.Field("emulation_note", facts.emulation_note);
  w.Field("verified", facts.verified);
  w.Field("verified_collectives", facts.verified_collectives);
  w.Field("verify_failures", facts.verify_failures);
  w.Field("first_mismatch", facts.first_mismatch);
  w.Field("communicators", facts.communicators);
  w.Field("materialized_peak_bytes", facts.materialized_peak_bytes);
  WriteOptionalBytes(w, "device_used_before_bytes", facts.device_used_before_bytes);
  WriteOptionalBytes(w, "device_used_after_bytes", facts.device_used_after_bytes);
  WriteOptionalBytes(w, "device_used_peak_bytes", facts.device_used_peak_bytes);
  w.EndObject();
}

void WriteRun(JsonWriter& w, const RunResult& run) {
  w.BeginObject();
  w.Field("policy", run.policy);
  w.Field("canonical", run.canonical);
  w.Field("bucket_cap_mb", run.bucket_cap_mb);
  w.Field("memory_model", run.memory_model);
  w.Field("setting", run.setting);
  w.Field("peak_allocated_bytes", run.peak.allocated_bytes);
  w.Field("peak_reserved_bytes", run.peak.reserved_bytes);
  w.Field("bucket_bytes_at_peak", SumIf(run.peak.by_category, &IsBucketCategory));
  w.Field("policy_bytes_at_peak", SumIf(run.peak.by_category, &IsPolicyCategory));
  w.Field("peak_bucket_bytes", run.peak_bucket_bytes);
  w.Field("final_allocated_bytes", run.final_allocated_bytes);
  WritePeak(w, run.peak);
  w.Field("buckets", run.counters.buckets);
  w.Field("flushes", run.counters.flushes);
  w.Field("bypassed_requests", run.counters.bypasses);
  w.Field("bucketed_requests", run.counters.bucketed);
  w.Field("compute_us", run.compute_us);
  WriteOom(w, run.oom);
  WriteDevice(w, run);
  WriteAllocatorTotals(w, run.allocator);
  WriteMarks(w, run.marks);
  WritePhases(w, run.phases);
  WriteTiming(w, run);
  WriteExecution(w, run.execution);
  WriteTimeline(w, run.timeline);
  WriteBucketLifetimes(w, run);
  WriteCollectiveSummary(w, run.collective_summary);
  if (run.collective_log_kept) WriteCollectives(w, run.collectives);
  w.EndObject();
}

// The policies' entries are written by `write_runs`, from RunResults or gathered fragments.
void WriteReport(JsonWriter& w, const ReportTraceInfo& trace,
                 const std::function<void(JsonWriter&)>& write_runs, const ReportContext& context,
                 const SweepSection* sweep) {
  w.BeginObject();
  w.Field("schema_version", kReportSchemaVersion);
  WriteContext(w, context);
  WriteTrace(w, trace);
  w.Key("policies");
  w.BeginArray();
  write_runs(w);
  w.EndArray();
  if (sweep) WriteSweep(w, *sweep);
  w.EndObject();
}

// Where a streamed report goes: an AtomicFile (the file appears only when complete, with its
// missing parent directories created), or stdout for "-".
class OutputFile {
 public:
  Status Open(const std::string& path) {
    path_ = path;
    if (path == "-") return Status::Ok();
    Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
    if (!file.ok()) return file.status();
    file_ = std::move(*file);
    return Status::Ok();
  }
  void Write(std::string_view text) {
    if (file_) {
      file_->stream().write(text.data(), static_cast<std::streamsize>(text.size()));
    } else if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size()) {
      stdout_failed_ = true;
    }
  }
  Status Close() {
    if (file_) return file_->Commit();
    if (stdout_failed_ || std::fflush(stdout) != 0) {
      return IoError(fmt::format("cannot write '{}'", path_));
    }
    return Status::Ok();
  }

 private:
  std::string path_;
  std::unique_ptr<AtomicFile> file_;  // unset: stdout
  bool stdout_failed_ = false;
};

std::function<void(JsonWriter&)> RunsOf(const std::vector<RunResult>& runs) {
  return [&runs](JsonWriter& w) {
    for (const RunResult& run : runs) WriteRun(w, run);
  };
}

Status StreamReport(const std::string& path, const std::function<void(JsonWriter&)>& write_report) {
  OutputFile file;
  BUCKETSIM_RETURN_IF_ERROR(file.Open(path));
  JsonWriter w([&file](std::string_view text) { file.Write(text); });
  write_report(w);
  w.Finish();
  return file.Close();
}

}  // namespace

void WriteContext(JsonWriter& w, const ReportContext& context) {
  w.Key("context");
  w.BeginObject();
  w.Field("tool", "bucketsim");
  w.Field("tool_version", context.tool_version);
  w.Field("git_sha", context.git_sha);
  w.Field("backend", context.backend);
  w.Field("memory_model", context.memory_model);
  w.Field("time_profile", context.time_profile);
  w.Key("argv");
  w.BeginArray();
  for (const std::string& arg : context.argv) w.String(arg);
  w.EndArray();
  w.Field("host", context.host);
  w.Field("trace_path", context.trace_path);
  w.Field("trace_name", context.trace_name);
  w.Field("trace_digest", context.trace_digest);
  w.EndObject();
}

std::string ReportJsonText(const ReplayOutcome& outcome, const ReportContext& context,
                           const SweepSection* sweep) {
  JsonWriter w;
  WriteReport(w, TraceInfoOf(outcome.header, outcome.summary), RunsOf(outcome.runs), context,
              sweep);
  return w.Finish();
}

Status WriteReportJson(const std::string& path, const ReplayOutcome& outcome,
                       const ReportContext& context, const SweepSection* sweep) {
  return StreamReport(path, [&](JsonWriter& w) {
    WriteReport(w, TraceInfoOf(outcome.header, outcome.summary), RunsOf(outcome.runs), context,
                sweep);
  });
}

std::string RunJsonFragment(const RunResult& run) {
  // Written where it stands in a report (inside the top-level object's `policies`, depth
  // kFragmentDepth), so that its indentation is the report's; the enclosing text is cut off.
  constexpr std::string_view kBefore = "{\n  \"policies\": [\n    ";
  constexpr std::string_view kAfter = "\n  ]\n}\n";
  JsonWriter w;
  w.BeginObject();
  w.Key("policies");
  w.BeginArray();
  WriteRun(w, run);
  w.EndArray();
  w.EndObject();
  std::string text = w.Finish();
  BUCKETSIM_CHECK(text.size() > kBefore.size() + kAfter.size() && text.starts_with(kBefore) &&
                  text.ends_with(kAfter));
  return text.substr(kBefore.size(), text.size() - kBefore.size() - kAfter.size());
}

Status WriteSweepReportJson(const std::string& path, const std::vector<TraceReportParts>& reports) {
  BUCKETSIM_CHECK(!reports.empty());
  auto write_report = [](JsonWriter& w, const TraceReportParts& r) {
    auto runs = [&r](JsonWriter& writer) {
      if (r.runs) {
        for (const RunResult& run : *r.runs) WriteRun(writer, run);
        return;
      }
      for (const std::string& fragment : *r.run_fragments) writer.Raw(fragment, kFragmentDepth);
    };
    WriteReport(w, *r.trace, runs, *r.context, r.sweep);
  };
  if (reports.size() == 1) {
    return StreamReport(path, [&](JsonWriter& w) { write_report(w, reports.front()); });
  }
  return StreamReport(path, [&](JsonWriter& w) {
    w.BeginObject();
    w.Field("schema_version", kReportSchemaVersion);
    w.Key("sweeps");
    w.BeginArray();
    for (const TraceReportParts& report : reports) write_report(w, report);
    w.EndArray();
    w.EndObject();
  });
}

Status WriteTextFile(const std::string& path, std::string_view text) {
  return WriteFileAtomically(path, text);
}

}  // namespace bucketsim
