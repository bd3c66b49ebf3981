#include "core/event.h"

#include <array>

namespace bucketsim {

namespace {

Event OfKind(EventKind kind) {
  Event event;
  event.kind = kind;
  return event;
}

}  // namespace

Event IterationEvent(std::uint64_t index) {
  Event event = OfKind(EventKind::kIteration);
  event.id = index;
  return event;
}

Event PhaseEvent(Phase phase) {
  Event event = OfKind(EventKind::kPhase);
  event.phase = phase;
  return event;
}

Event AllocEvent(std::uint64_t id, Bytes bytes, Category category, StreamId stream) {
  Event event = OfKind(EventKind::kAlloc);
  event.id = id;
  event.bytes = bytes;
  event.category = category;
  event.stream = stream;
  return event;
}

Event FreeEvent(std::uint64_t id) {
  Event event = OfKind(EventKind::kFree);
  event.id = id;
  return event;
}

Event ComputeEvent(StreamId stream, Micros duration, std::uint32_t name) {
  Event event = OfKind(EventKind::kCompute);
  event.stream = stream;
  event.dur_us = duration;
  event.name = name;
  return event;
}

Event MarkEvent(std::uint32_t name) {
  Event event = OfKind(EventKind::kMark);
  event.name = name;
  return event;
}

Event ReduceScatterEvent(std::uint32_t fsdp, std::uint32_t param, GroupId group, DType dtype,
                         Numel numel, ShardMode mode, DType cast_dtype) {
  Event event = OfKind(EventKind::kReduceScatter);
  event.unit = fsdp;
  event.param = param;
  event.group = group;
  event.dtype = dtype;
  event.numel = numel;
  event.shard_mode = mode;
  event.cast_dtype = cast_dtype;
  return event;
}

Event FlushEvent() { return OfKind(EventKind::kFlush); }

Event ZeroGradEvent(bool set_to_none) {
  Event event = OfKind(EventKind::kZeroGrad);
  event.set_to_none = set_to_none;
  return event;
}

Event RecordStreamEvent(std::uint64_t id, StreamId stream) {
  Event event = OfKind(EventKind::kRecordStream);
  event.id = id;
  event.stream = stream;
  return event;
}

Event SyncEvent(StreamId stream) {
  Event event = OfKind(EventKind::kSync);
  event.stream = stream;
  return event;
}

Event EmptyCacheEvent() { return OfKind(EventKind::kEmptyCache); }

Event TraceCollectiveEvent(EventKind kind, std::uint64_t id, StreamId stream, GroupId group,
                           DType dtype, Numel numel) {
  Event event = OfKind(kind);
  event.id = id;
  event.stream = stream;
  event.group = group;
  event.dtype = dtype;
  event.numel = numel;
  return event;
}

Event ObservedSegmentEvent(EventKind kind, std::uint64_t address, Bytes bytes, StreamId stream) {
  Event event = OfKind(kind);
  event.id = address;
  event.bytes = bytes;
  event.stream = stream;
  return event;
}

Event ObservedOomEvent(Bytes bytes, StreamId stream, Bytes device_free) {
  Event event = OfKind(EventKind::kOom);
  event.bytes = bytes;
  event.stream = stream;
  event.id = device_free;
  return event;
}

Event ObservedSnapshotEvent(Bytes active_bytes) {
  Event event = OfKind(EventKind::kSnapshot);
  event.bytes = active_bytes;
  return event;
}

std::string_view EventKindName(EventKind kind) {
  static constexpr std::array<std::string_view, kNumEventKinds> kNames = {
      "iteration",    "phase",       "alloc",         "free",       "compute",
      "mark",         "rs",          "flush",         "zero_grad",  "record_stream",
      "sync",         "empty_cache", "all_gather",    "all_reduce", "segment_alloc",
      "segment_free", "segment_map", "segment_unmap", "oom",        "snapshot"};
  return kNames[static_cast<int>(kind)];
}

std::string_view PhaseName(Phase phase) {
  static constexpr std::array<std::string_view, kNumPhases> kNames = {"init", "forward", "backward",
                                                                      "step", "zero_grad"};
  return kNames[static_cast<int>(phase)];
}

std::string_view ShardModeName(ShardMode mode) {
  static constexpr std::array<std::string_view, 5> kNames = {"view", "cast", "accumulate",
                                                             "offload", "no_grad"};
  return kNames[static_cast<int>(mode)];
}

}  // namespace bucketsim
