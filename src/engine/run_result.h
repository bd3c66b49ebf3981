// What one replay of a trace under one policy produced: plain values for the reporters. Every
// byte figure is "allocated" as the memory model charges it; `reserved` figures come from the
// same model (equal to allocated under `exact`).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "backend/span_timing.h"
#include "core/category.h"
#include "core/collective_record.h"
#include "core/event.h"
#include "engine/collective_summary.h"
#include "engine/memory_timeline.h"
#include "memory/device_overhead.h"
#include "memory/memory_model.h"
#include "policy/bucket_policy.h"

namespace bucketsim {

using CategoryBytes = std::array<Bytes, kNumCategories>;

struct LiveAllocation {
  Category category = Category::kOther;
  Bytes bytes = 0;
  std::string what;      // "trace alloc id 17" or "bucket_data bf16 group 3"
  EventIndex since = 0;  // the event at which it was allocated
};

struct PeakInfo {
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  EventIndex event_index = 0;
  std::uint64_t iteration = 0;
  Phase phase = Phase::kInit;
  CategoryBytes by_category{};
  std::vector<LiveAllocation> largest;  // the largest allocations alive at the peak
  // Where reserved-but-unallocated memory sat at the allocated peak (caching model only).
  std::optional<FragmentationInfo> fragmentation;
};

// One stretch of the trace between two phase markers.
struct PhaseStats {
  std::uint64_t iteration = 0;
  Phase phase = Phase::kInit;
  EventIndex first_event = 0;
  EventIndex end_event = 0;  // exclusive: the next phase marker, or the end of the replay
  Bytes start_bytes = 0;
  Bytes peak_bytes = 0;
  Bytes end_bytes = 0;
  Bytes peak_reserved_bytes = 0;
  Micros compute_us = 0;
};

struct MarkSample {
  std::string name;
  std::uint64_t iteration = 0;
  EventIndex event_index = 0;
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  CategoryBytes by_category{};
};

// One allocation of a bucket buffer (`bucket_data` or `bucket_output`), from the event that
// allocated it to the one that freed it. An output shard replaced at a flush but kept alive by
// gradient views is `retired` at the flush and freed at `zero_grad`.
struct BucketLifetime {
  Category category = Category::kBucketData;  // as allocated
  DType dtype = DType::kFloat32;
  GroupId group = 0;
  Bytes bytes = 0;
  EventIndex allocated_event = 0;
  std::optional<EventIndex> retired_event;
  std::optional<EventIndex> freed_event;  // unset: alive at the end of the replay
};

// The request a device of the given capacity could not serve; the replay stops there.
struct OomEvent {
  EventIndex event_index = 0;
  Bytes requested_bytes = 0;
  StreamId stream = 0;
  Category category = Category::kOther;
  OomReport report;
};

// One point of the memory counters on the backend's clock (µs), kept with the timeline.
struct MemorySample {
  Micros ts_us = 0;
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  Bytes bucket_bytes = 0;  // bucket_data + bucket_output
};

// A named point in time: a mark or the start of a phase or an iteration.
struct TimelineInstant {
  Micros ts_us = 0;
  std::string category;  // "mark", "phase" or "iteration"
  std::string name;
};

// What the sim backend priced by a time profile predicts for a run that was measured.
struct TimePrediction {
  std::string profile;  // the profile's name
  std::vector<IterationTiming> iterations;
};

// What a replay did when, kept only when asked for (ReplayOptions::keep_timeline): the spans of
// every iteration as the backend returned them, and, where the backend knows the time at issue
// (sim), the memory counters after every change and the instants. Memory samples and instants
// are in program order, their times never decreasing.
struct Timeline {
  std::vector<IterationSpans> iterations;
  std::vector<MemorySample> memory;
  std::vector<TimelineInstant> instants;
};

struct RunResult {
  std::string policy;     // as the user named it
  std::string canonical;  // lifetime=...,key=...,cap=...
  // The framework's own setting (FrameworkSetting), the trace's fsdp_setting for the policy of
  // the implementation the trace was emitted for.
  std::string setting;
  double bucket_cap_mb = 0;
  std::string memory_model;
  PeakInfo peak;
  Bytes peak_bucket_bytes = 0;  // largest bucket_data + bucket_output at any time
  Bytes final_allocated_bytes = 0;
  std::vector<PhaseStats> phases;
  std::vector<MarkSample> marks;
  MemoryTimelineData timeline;
  // The first ReplayOptions::max_bucket_lifetimes allocations of bucket buffers, in order.
  std::vector<BucketLifetime> bucket_lifetimes;
  std::uint64_t bucket_lifetimes_dropped = 0;  // allocations past that bound
  // Every collective, summarised per stretch of the trace; always kept.
  CollectiveSummary collective_summary;
  // The full log, one record per collective in issue order: only with
  // ReplayOptions::keep_collective_log (--full-log), as it grows with the trace.
  std::vector<CollectiveRecord> collectives;
  bool collective_log_kept = false;  // whether `collectives` is the full log
  PolicyCounters counters;
  std::optional<OomEvent> oom;  // set when --device-memory was too small; figures stop there
  // --device-memory: the device and what of it was outside the allocator (its capacity is the
  // rest); none without a device.
  std::optional<DeviceBudget> device;
  std::optional<AllocatorTotals> allocator;  // caching model only
  std::uint64_t events = 0;
  Micros compute_us = 0;
  // Time, on the backend that ran the replay: one entry per iteration of the trace.
  std::string backend;
  std::vector<IterationTiming> iterations;
  // run --backend host|cuda --profile P: the sim's prediction of this run's time (the same trace,
  // policy and memory model replayed by the sim backend priced by P), shown beside the
  // measurement.
  std::optional<TimePrediction> prediction;
  ExecutionFacts execution;
  std::optional<Timeline> stream_timeline;  // with ReplayOptions::keep_timeline
};

}  // namespace bucketsim
