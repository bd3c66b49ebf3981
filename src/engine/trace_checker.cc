#include "engine/trace_checker.h"

#include <algorithm>

#include <fmt/format.h>

namespace bucketsim {

std::string_view InconsistencyName(Inconsistency kind) {
  static constexpr std::array<std::string_view, kNumInconsistencies> kNames = {
      "free_of_unknown_id",           "double_free",         "alloc_of_live_id",
      "record_stream_of_dead_id",     "iteration_order",     "flush_outside_backward",
      "rs_outside_backward",          "rs_on_held_gradient", "unflushed_requests",
      "collective_outside_allocation"};
  return kNames[static_cast<int>(kind)];
}

std::uint64_t TraceSummary::num_inconsistencies() const {
  std::uint64_t total = 0;
  for (const InconsistencyCount& c : inconsistencies) total += c.count;
  return total;
}

Status TraceChecker::Broken(Inconsistency kind, Status status) {
  last_broken_ = kind;
  return status;
}

void TraceChecker::Record(Inconsistency kind, EventIndex index, const Status& status) {
  auto it = std::find_if(summary_.inconsistencies.begin(), summary_.inconsistencies.end(),
                         [kind](const InconsistencyCount& c) { return c.kind == kind; });
  if (it == summary_.inconsistencies.end()) {
    it = summary_.inconsistencies.insert(summary_.inconsistencies.end(),
                                         InconsistencyCount{kind, 0, {}, status.message()});
  }
  ++it->count;
  if (it->first_events.size() < InconsistencyCount::kFirstEvents) it->first_events.push_back(index);
}

Status TraceChecker::OnHeader(const TraceHeader& header) {
  header_ = &header;
  holds_grad_.assign(header.num_params(), false);
  return next_ ? next_->OnHeader(header) : Status::Ok();
}

// Nearly every event is one of these three kinds: they are checked inline, the rest out of line.
inline Status TraceChecker::Check(Event& event) {
  switch (event.kind) {
    case EventKind::kAlloc:
      return CheckAlloc(event);
    case EventKind::kFree:
      return CheckFree(event);
    case EventKind::kCompute:
      summary_.compute_us += event.dur_us;
      return Status::Ok();
    default:
      return CheckOther(event);
  }
}

Status TraceChecker::OnEvent(const Event& event) {
  Event checked = event;
  Status status = Check(checked);
  if (!status.ok()) [[unlikely]] {
    return OnBroken(event, std::move(status));
  }
  Count(event.kind);
  return next_ ? next_->OnEvent(checked) : Status::Ok();
}

Status TraceChecker::OnBroken(const Event& event, Status status) {
  if (mode_ == CheckerMode::kReject) return status;
  Count(event.kind);
  Record(last_broken_, event.index, status);
  if (last_broken_ != Inconsistency::kUnflushedRequests) return Status::Ok();  // not replayed
  // The missing flush is reported once; the phase change or zero_grad itself still applies.
  unflushed_requests_ = 0;
  Event checked = event;
  BUCKETSIM_CHECK(Check(checked).ok());
  return next_ ? next_->OnEvent(checked) : Status::Ok();
}

Status TraceChecker::CheckOther(Event& event) {
  switch (event.kind) {
    case EventKind::kIteration:
      if (seen_iteration_ && event.id <= iteration_) {
        return Broken(
            Inconsistency::kIterationOrder,
            InvalidTrace(fmt::format("event {}: iteration {} does not follow iteration {}",
                                     event.index, event.id, iteration_)));
      }
      seen_iteration_ = true;
      iteration_ = event.id;
      ++summary_.iterations;
      return Status::Ok();
    case EventKind::kPhase:
      return CheckPhase(event);
    case EventKind::kAlloc:
    case EventKind::kFree:
    case EventKind::kCompute:
      return Check(event);  // Check handles these itself, inline
    case EventKind::kMark:
      return Status::Ok();
    case EventKind::kReduceScatter:
      return CheckReduceScatter(event);
    case EventKind::kFlush:
      if (phase_ != Phase::kBackward) {
        return Broken(Inconsistency::kFlushOutsideBackward,
                      InvalidTrace(fmt::format("event {}: flush outside backward (phase is '{}')",
                                               event.index, PhaseName(phase_))));
      }
      unflushed_requests_ = 0;
      return Status::Ok();
    case EventKind::kRecordStream: {
      std::optional<std::uint32_t> slot = live_ids_.Find(event.id);
      if (!slot) {
        return Broken(
            Inconsistency::kRecordStreamOfDeadId,
            InvalidTrace(fmt::format("event {}: record_stream of id {}, which is not live",
                                     event.index, event.id)));
      }
      event.slot = *slot;
      return Status::Ok();
    }
    case EventKind::kSync:
    case EventKind::kEmptyCache:
      return Status::Ok();
    case EventKind::kAllGather:
    case EventKind::kAllReduce:
      return CheckTraceCollective(event);
    case EventKind::kSegmentAlloc:
    case EventKind::kSegmentFree:
    case EventKind::kSegmentMap:
    case EventKind::kSegmentUnmap:
    case EventKind::kOom:
    case EventKind::kSnapshot:
      return Status::Ok();  // observed, not replayed: nothing to be consistent with
    case EventKind::kZeroGrad:
      // Requests still in a bucket deliver their gradients at the flush, after this zero_grad.
      if (unflushed_requests_ > 0) {
        last_broken_ = Inconsistency::kUnflushedRequests;
        return InvalidTrace(fmt::format(
            "event {}: zero_grad while {} reduce-scatter request(s) since event {} are not "
            "flushed",
            event.index, unflushed_requests_, first_unflushed_));
      }
      if (event.set_to_none) holds_grad_.assign(holds_grad_.size(), false);
      return Status::Ok();
  }
  return Status::Ok();
}

Status TraceChecker::CheckPhase(const Event& event) {
  if (unflushed_requests_ > 0 && event.phase != Phase::kBackward) {
    last_broken_ = Inconsistency::kUnflushedRequests;
    return InvalidTrace(fmt::format(
        "event {}: phase '{}' begins while {} reduce-scatter request(s) since event {} were "
        "never flushed (missing the end-of-backward 'flush' event)",
        event.index, PhaseName(event.phase), unflushed_requests_, first_unflushed_));
  }
  phase_ = event.phase;
  return Status::Ok();
}

Status TraceChecker::AllocOfLiveId(const Event& event) {
  return Broken(Inconsistency::kAllocOfLiveId,
                InvalidTrace(fmt::format("event {}: alloc of id {}, which is already live "
                                         "(allocated at event {})",
                                         event.index, event.id,
                                         slots_[*live_ids_.Find(event.id)].allocated_at)));
}

// An all_gather receives group-size x numel elements into its allocation, an all_reduce sums
// numel of them in place: both must fit in a live allocation.
Status TraceChecker::CheckTraceCollective(Event& event) {
  const std::optional<std::uint32_t> slot = live_ids_.Find(event.id);
  const std::string_view kind = EventKindName(event.kind);
  if (!slot) {
    return Broken(Inconsistency::kCollectiveOutsideAllocation,
                  InvalidTrace(fmt::format("event {}: {} into id {}, which is not live",
                                           event.index, kind, event.id)));
  }
  const ProcessGroup* group = header_->FindGroup(event.group);
  BUCKETSIM_CHECK(group != nullptr);  // the reader checks it
  const Numel members = event.kind == EventKind::kAllGather ? group->size() : 1;
  const Bytes holds = slots_[*slot].bytes / ElementSize(event.dtype);
  if (event.numel > holds / members) {
    return Broken(
        Inconsistency::kCollectiveOutsideAllocation,
        InvalidTrace(fmt::format(
            "event {}: {} of {} x {} {} elements into id {}, which holds {} bytes", event.index,
            kind, members, event.numel, DTypeName(event.dtype), event.id, slots_[*slot].bytes)));
  }
  event.slot = *slot;
  return Status::Ok();
}

inline Status TraceChecker::CheckAlloc(Event& event) {
  const std::uint32_t slot = free_slots_.empty() ? num_slots_ : free_slots_.back();
  if (!live_ids_.Insert(event.id, slot)) return AllocOfLiveId(event);
  if (free_slots_.empty()) {
    ++num_slots_;
    slots_.emplace_back();
  } else {
    free_slots_.pop_back();
  }
  RememberAllocated(event.id);
  slots_[slot] = {event.bytes, event.index, event.category, true};
  event.slot = slot;
  summary_.allocated_bytes[static_cast<int>(event.category)] += event.bytes;
  live_bytes_ += event.bytes;
  ++live_count_;
  summary_.max_live_bytes = std::max(summary_.max_live_bytes, live_bytes_);
  summary_.max_live_allocations = std::max(summary_.max_live_allocations, live_count_);
  return Status::Ok();
}

inline Status TraceChecker::CheckFree(Event& event) {
  std::optional<std::uint32_t> slot = live_ids_.Erase(event.id);
  if (!slot) return FreeOfDeadId(event);
  SlotState& state = slots_[*slot];
  state.live = false;
  free_slots_.push_back(*slot);
  event.slot = *slot;
  event.category = state.category;
  event.bytes = state.bytes;
  live_bytes_ -= state.bytes;
  --live_count_;
  RememberFree(event.id, event.index);
  return Status::Ok();
}

Status TraceChecker::FreeOfDeadId(const Event& event) {
  if (std::optional<EventIndex> freed_at = RecentFree(event.id)) {
    return Broken(Inconsistency::kDoubleFree,
                  InvalidTrace(fmt::format("event {}: double free of id {} (already freed at "
                                           "event {})",
                                           event.index, event.id, *freed_at)));
  }
  if (WasAllocated(event.id)) {
    return Broken(Inconsistency::kDoubleFree,
                  InvalidTrace(fmt::format("event {}: double free of id {} (already freed, "
                                           "more than {} frees before)",
                                           event.index, event.id, remembered_frees_)));
  }
  return Broken(Inconsistency::kFreeOfUnknownId,
                InvalidTrace(fmt::format("event {}: free of unknown allocation id {}", event.index,
                                         event.id)));
}

inline void TraceChecker::RememberFree(std::uint64_t id, EventIndex at) {
  if (recent_frees_.empty()) return;
  recent_frees_[next_recent_] = {id, at};
  if (++next_recent_ == recent_frees_.size()) next_recent_ = 0;  // a division cost more, per free
  recent_count_ = std::min(recent_count_ + 1, recent_frees_.size());
}

std::optional<EventIndex> TraceChecker::RecentFree(std::uint64_t id) const {
  // Newest first: the ring ends just before next_recent_. Only an erroneous free scans it.
  const std::size_t size = recent_frees_.size();
  for (std::size_t back = 1; back <= recent_count_; ++back) {
    const auto& [freed_id, freed_at] = recent_frees_[(next_recent_ + size - back) % size];
    if (freed_id == id) return freed_at;
  }
  return std::nullopt;
}

inline void TraceChecker::RememberAllocated(std::uint64_t id) {
  // Generated traces number allocations in order: the id extends the last range.
  if (last_range_end_ != nullptr && id == *last_range_end_ + 1) {
    *last_range_end_ = id;
    return;
  }
  AddAllocatedId(id);
  last_range_end_ = &std::prev(allocated_ids_.end())->second;
}

void TraceChecker::AddAllocatedId(std::uint64_t id) {
  if (!allocated_ids_.empty()) {
    auto last = std::prev(allocated_ids_.end());
    if (id > last->second) {
      if (id - 1 == last->second) {
        last->second = id;
      } else {
        allocated_ids_.emplace_hint(allocated_ids_.end(), id, id);
      }
      return;
    }
  }
  auto next = allocated_ids_.upper_bound(id);
  if (next != allocated_ids_.begin()) {
    auto range = std::prev(next);
    if (range->second >= id) return;  // already there
    if (range->second + 1 == id) {
      range->second = id;
      if (next != allocated_ids_.end() && next->first == id + 1) {
        range->second = next->second;
        allocated_ids_.erase(next);
      }
      return;
    }
  }
  if (next != allocated_ids_.end() && id + 1 == next->first) {
    auto node = allocated_ids_.extract(next);
    node.key() = id;  // the range grows down by one: its node keeps its place in the order
    allocated_ids_.insert(std::move(node));
    return;
  }
  allocated_ids_.emplace_hint(next, id, id);
}

bool TraceChecker::WasAllocated(std::uint64_t id) const {
  auto next = allocated_ids_.upper_bound(id);
  return next != allocated_ids_.begin() && std::prev(next)->second >= id;
}

Status TraceChecker::CheckReduceScatter(const Event& event) {
  if (phase_ != Phase::kBackward) {
    return Broken(Inconsistency::kRsOutsideBackward,
                  InvalidTrace(fmt::format("event {}: rs outside backward (phase is '{}')",
                                           event.index, PhaseName(phase_))));
  }
  // An offloaded shard, or a parameter without a gradient, leaves nothing on the device to
  // accumulate into.
  if (event.shard_mode != ShardMode::kAccumulate && event.shard_mode != ShardMode::kOffload &&
      event.shard_mode != ShardMode::kNoGrad) {
    std::uint32_t param = header_->ParamIndex(event.unit, event.param);
    if (holds_grad_[param]) {
      last_broken_ = Inconsistency::kRsOnHeldGradient;
      return InvalidTrace(fmt::format(
          "event {}: rs: shard '{}' for fsdp {} param {}, which still holds a reduced gradient "
          "(no zero_grad(set_to_none=True) since); FSDP accumulates into it: use shard "
          "'accumulate'",
          event.index, ShardModeName(event.shard_mode), event.unit, event.param));
    }
    holds_grad_[param] = true;
  }
  if (unflushed_requests_++ == 0) first_unflushed_ = event.index;
  return Status::Ok();
}

Status TraceChecker::OnEnd() {
  if (unflushed_requests_ > 0) {
    Status status = InvalidTrace(
        fmt::format("the trace ends with {} reduce-scatter request(s) since event {} never flushed "
                    "(missing the end-of-backward 'flush' event)",
                    unflushed_requests_, first_unflushed_));
    if (mode_ == CheckerMode::kReject) return status;
    Record(Inconsistency::kUnflushedRequests, first_unflushed_, status);
  }
  for (const SlotState& state : slots_) {
    if (!state.live) continue;
    summary_.alive_at_end_bytes[static_cast<int>(state.category)] += state.bytes;
    ++summary_.alive_at_end_count[static_cast<int>(state.category)];
  }
  return next_ ? next_->OnEnd() : Status::Ok();
}

}  // namespace bucketsim
