// One event of a trace: what one rank did at one point of a training iteration. Events are
// plain values, the same for every policy; bucket buffers and their temporaries are never
// events (a policy makes them at replay). Field use by kind:
//
//   kIteration      id = iteration index
//   kPhase          phase
//   kAlloc          id, bytes, stream, category      (slot: set by TraceChecker)
//   kFree           id                                (slot: set by TraceChecker)
//   kCompute        stream, dur_us, name
//   kMark           name
//   kReduceScatter  fsdp, param, group, dtype, numel (per-rank), shard_mode, cast_dtype
//   kFlush          (the root's end-of-backward callback: reducer.flush() then teardown())
//   kZeroGrad       set_to_none
//   kRecordStream   id, stream   (tensor.record_stream: the allocation is in use on `stream`)
//   kSync           stream       (all work queued on `stream` so far has completed)
//   kEmptyCache                  (torch.cuda.empty_cache())
//   kAllGather      id, stream, group, dtype, numel   (schema_version 5: the framework gathers a
//                   unit's parameters: every rank of `group` sends `numel` elements, and the
//                   allocation `id` receives all group-size x numel of them, the rank at
//                   position p's at [p * numel, (p + 1) * numel))
//   kAllReduce      id, stream, group, dtype, numel   (schema_version 5: the framework sums the
//                   first `numel` elements of allocation `id` over `group` in place: FSDP1
//                   NO_SHARD's gradient)
//
// Observed events (schema_version 3): what a real allocator did, recorded in an imported PyTorch
// memory snapshot (tools/snapshot_to_trace.py). Replays ignore them; they are the ground truth a
// SnapshotComparison compares the caching model's predictions with.
//   kSegmentAlloc   id = address, bytes, stream   (cudaMalloc of a segment)
//   kSegmentFree    id = address, bytes, stream   (cudaFree of a segment)
//   kSegmentMap     id = address, bytes, stream   (expandable segment: pages mapped)
//   kSegmentUnmap   id = address, bytes, stream   (expandable segment: pages unmapped)
//   kOom            bytes (the rounded request), stream, id = device_free (cudaMemGetInfo)
//   kSnapshot       bytes = active bytes at a torch.cuda.memory._snapshot() call; with
//                   has_totals (the dump's own `segments`, last event only): numel = allocated
//                   bytes, group = reserved bytes, id = requested bytes
// alloc, free and the observed events may carry time_us (v3), microseconds since the Unix epoch
// as the snapshot recorded it; 0 when not recorded.
//
// `name` indexes TraceHeader::names. `index` is the event's position in the trace (0-based),
// quoted by every error message about it.
#pragma once

#include <string_view>

#include "core/category.h"
#include "core/dtype.h"
#include "core/units.h"

namespace bucketsim {

enum class EventKind : std::uint8_t {
  kIteration,
  kPhase,
  kAlloc,
  kFree,
  kCompute,
  kMark,
  kReduceScatter,
  kFlush,
  kZeroGrad,
  kRecordStream,  // schema_version 2
  kSync,          // schema_version 2
  kEmptyCache,    // schema_version 2
  kAllGather,     // schema_version 5
  kAllReduce,     // schema_version 5
  kSegmentAlloc,  // schema_version 3, observed
  kSegmentFree,   // schema_version 3, observed
  kSegmentMap,    // schema_version 3, observed
  kSegmentUnmap,  // schema_version 3, observed
  kOom,           // schema_version 3, observed
  kSnapshot,      // schema_version 3, observed
};

inline constexpr int kNumEventKinds = 20;

// Ground truth recorded by a real allocator (v3): never replayed, only compared with.
constexpr bool IsObservedEvent(EventKind kind) { return kind >= EventKind::kSegmentAlloc; }

// kInit is the phase before the first phase marker (model construction, lazy init).
enum class Phase : std::uint8_t { kInit, kForward, kBackward, kStep, kZeroGrad };
inline constexpr int kNumPhases = 5;

// What the FSDP post-reduction hook does with the reduced shard; it decides how long the
// memory the shard lives in stays alive (reference/fsdp_semantics.md §2.4).
enum class ShardMode : std::uint8_t {
  kView,        // kept as the gradient: a view that keeps its whole buffer alive until zero_grad
  kCast,        // .to(cast_dtype): a new tensor is the gradient, the reduced buffer is let go
  kAccumulate,  // += into an existing gradient shard: no allocation, the buffer is let go
  // .to("cpu"): copied to host memory (FSDP2's CPUOffloadPolicy); the device keeps nothing of
  // it and the buffer is let go (format v4)
  kOffload,
  // No gradient reached the parameter in this backward: FSDP2 leaves it out of its group's
  // reduce-scatter (foreach_reduce's fsdp_params_with_grad) and its .grad stays None. A policy
  // that reduces it anyway reduces zeros and keeps nothing of them (format v6)
  kNoGrad,
};

struct Event {
  EventKind kind = EventKind::kMark;
  Phase phase = Phase::kInit;
  Category category = Category::kOther;
  DType dtype = DType::kFloat32;
  DType cast_dtype = DType::kFloat32;
  ShardMode shard_mode = ShardMode::kView;
  bool set_to_none = true;
  bool has_totals = false;  // kSnapshot: numel, group and id hold the dump's totals
  StreamId stream = 0;
  std::uint32_t name = 0;
  std::uint32_t unit = 0;  // the trace's "fsdp": the unit's index in the header's units
  std::uint32_t param = 0;
  std::uint32_t slot = 0;
  std::uint64_t id = 0;
  Bytes bytes = 0;
  GroupId group = 0;
  Numel numel = 0;
  Micros dur_us = 0;
  std::uint64_t time_us = 0;
  EventIndex index = 0;
};

// Constructors of each kind, filling only the fields that kind uses.
Event IterationEvent(std::uint64_t index);
Event PhaseEvent(Phase phase);
Event AllocEvent(std::uint64_t id, Bytes bytes, Category category, StreamId stream);
Event FreeEvent(std::uint64_t id);
Event ComputeEvent(StreamId stream, Micros duration, std::uint32_t name);
Event MarkEvent(std::uint32_t name);
Event ReduceScatterEvent(std::uint32_t fsdp, std::uint32_t param, GroupId group, DType dtype,
                         Numel numel, ShardMode mode, DType cast_dtype = DType::kFloat32);
Event FlushEvent();
Event ZeroGradEvent(bool set_to_none);
Event RecordStreamEvent(std::uint64_t id, StreamId stream);
Event SyncEvent(StreamId stream);
Event EmptyCacheEvent();
// kAllGather or kAllReduce: a collective of the framework's own on the trace's allocation `id`.
Event TraceCollectiveEvent(EventKind kind, std::uint64_t id, StreamId stream, GroupId group,
                           DType dtype, Numel numel);
// kSegmentAlloc, kSegmentFree, kSegmentMap or kSegmentUnmap.
Event ObservedSegmentEvent(EventKind kind, std::uint64_t address, Bytes bytes, StreamId stream);
Event ObservedOomEvent(Bytes bytes, StreamId stream, Bytes device_free);
Event ObservedSnapshotEvent(Bytes active_bytes);

std::string_view EventKindName(EventKind kind);  // the trace's "ev" value: "alloc", "rs", ...
std::string_view PhaseName(Phase phase);
std::string_view ShardModeName(ShardMode mode);

}  // namespace bucketsim
