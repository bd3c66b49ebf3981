#include "engine/trace_checker.h"

#include <algorithm>

#include <fmt/format.h>

namespace bucketsim {

std::string_view InconsistencyName(Inconsistency kind) {
  static constexpr std::array<std::string_view, kNumInconsistencies> kNames = {
      "free_of_unknown_id",       "double_free",         "alloc_of_live_id",
      "record_stream_of_dead_id", "iteration_order",     "flush_outside_backward",
      "rs_outside_backward",      "rs_on_held_gradient", "unflushed_requests"};
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

Status TraceChecker::OnEvent(const Event& event) {
  Event checked = event;
  Status status = Check(checked);
  if (!status.ok() && mode_ == CheckerMode::kReject) return status;
  ++summary_.events;
  ++summary_.events_by_kind[static_cast<int>(event.kind)];
  if (!status.ok()) {
    Record(last_broken_, event.index, status);
    if (last_broken_ != Inconsistency::kUnflushedRequests) return Status::Ok();  // not replayed
    // The missing flush is reported once; the phase change or zero_grad itself still applies.
    unflushed_requests_ = 0;
    checked = event;
    BUCKETSIM_CHECK(Check(checked).ok());
  }
  return next_ ? next_->OnEvent(checked) : Status::Ok();
}

Status TraceChecker::Check(Event& event) {
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
      return CheckAlloc(event);
    case EventKind::kFree:
      return CheckFree(event);
    case EventKind::kCompute:
      summary_.compute_us += event.dur_us;
      return Status::Ok();
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
      auto it = ids_.find(event.id);
      if (it == ids_.end() || !it->second.live) {
        return Broken(
            Inconsistency::kRecordStreamOfDeadId,
            InvalidTrace(fmt::format("event {}: record_stream of id {}, which is not live",
                                     event.index, event.id)));
      }
      event.slot = it->second.slot;
      return Status::Ok();
    }
    case EventKind::kSync:
    case EventKind::kEmptyCache:
      return Status::Ok();
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

Status TraceChecker::CheckAlloc(Event& event) {
  auto [it, inserted] = ids_.try_emplace(event.id);
  IdState& state = it->second;
  if (!inserted && state.live) {
    return Broken(Inconsistency::kAllocOfLiveId,
                  InvalidTrace(fmt::format("event {}: alloc of id {}, which is already live "
                                           "(allocated at event {})",
                                           event.index, event.id, state.last_event)));
  }
  // An id above every id allocated so far was never freed (the common case: fresh ids).
  if (inserted && allocated_any_ && event.id <= max_id_) ForgetFree(event.id);
  max_id_ = allocated_any_ ? std::max(max_id_, event.id) : event.id;
  allocated_any_ = true;
  if (free_slots_.empty()) {
    state.slot = num_slots_++;
  } else {
    state.slot = free_slots_.back();
    free_slots_.pop_back();
  }
  state.live = true;
  state.category = event.category;
  state.bytes = event.bytes;
  state.last_event = event.index;
  event.slot = state.slot;
  summary_.allocated_bytes[static_cast<int>(event.category)] += event.bytes;
  live_bytes_ += event.bytes;
  ++live_count_;
  summary_.max_live_bytes = std::max(summary_.max_live_bytes, live_bytes_);
  summary_.max_live_allocations = std::max(summary_.max_live_allocations, live_count_);
  return Status::Ok();
}

Status TraceChecker::CheckFree(Event& event) {
  auto it = ids_.find(event.id);
  if (it == ids_.end()) {
    if (InForgottenFrees(event.id)) {
      return Broken(Inconsistency::kDoubleFree,
                    InvalidTrace(fmt::format("event {}: double free of id {} (already freed, "
                                             "more than {} frees before)",
                                             event.index, event.id, remembered_frees_)));
    }
    return Broken(Inconsistency::kFreeOfUnknownId,
                  InvalidTrace(fmt::format("event {}: free of unknown allocation id {}",
                                           event.index, event.id)));
  }
  IdState& state = it->second;
  if (!state.live) {
    return Broken(Inconsistency::kDoubleFree,
                  InvalidTrace(fmt::format("event {}: double free of id {} (already freed at "
                                           "event {})",
                                           event.index, event.id, state.last_event)));
  }
  state.live = false;
  state.last_event = event.index;
  free_slots_.push_back(state.slot);
  event.slot = state.slot;
  event.category = state.category;
  event.bytes = state.bytes;
  live_bytes_ -= state.bytes;
  --live_count_;
  RememberFree(event.id, event.index);
  return Status::Ok();
}

void TraceChecker::RememberFree(std::uint64_t id, EventIndex at) {
  free_order_.emplace_back(id, at);
  if (free_order_.size() <= remembered_frees_) return;
  const auto [oldest, freed_at] = free_order_.front();
  free_order_.pop_front();
  // Unless the id was allocated again since (it is live, or was freed again later).
  auto it = ids_.find(oldest);
  if (it == ids_.end() || it->second.live || it->second.last_event != freed_at) return;
  ids_.erase(it);
  AddForgottenFree(oldest);
}

void TraceChecker::ForgetFree(std::uint64_t id) {
  auto next = forgotten_frees_.upper_bound(id);
  if (next == forgotten_frees_.begin()) return;
  auto range = std::prev(next);
  const auto [first, last] = *range;
  if (last < id) return;
  forgotten_frees_.erase(range);
  forgotten_hint_ = forgotten_frees_.end();
  if (first < id) forgotten_frees_.emplace(first, id - 1);
  if (id < last) forgotten_frees_.emplace(id + 1, last);
}

bool TraceChecker::InForgottenFrees(std::uint64_t id) const {
  auto next = forgotten_frees_.upper_bound(id);
  return next != forgotten_frees_.begin() && std::prev(next)->second >= id;
}

void TraceChecker::AddForgottenFree(std::uint64_t id) {
  // Generated traces free runs of consecutive ids: most often the id extends the range that
  // grew last, found without a search.
  auto next = forgotten_hint_ != forgotten_frees_.end() && forgotten_hint_->second + 1 == id
                  ? std::next(forgotten_hint_)
                  : forgotten_frees_.upper_bound(id);
  if (next != forgotten_frees_.begin()) {
    auto range = std::prev(next);
    if (range->second >= id) return;  // already there
    if (range->second + 1 == id) {
      range->second = id;
      if (next != forgotten_frees_.end() && next->first == id + 1) {
        range->second = next->second;
        forgotten_frees_.erase(next);
      }
      forgotten_hint_ = range;
      return;
    }
  }
  if (next != forgotten_frees_.end() && id + 1 == next->first) {
    const std::uint64_t last = next->second;
    forgotten_frees_.erase(next);
    forgotten_hint_ = forgotten_frees_.emplace(id, last).first;
    return;
  }
  forgotten_hint_ = forgotten_frees_.emplace(id, id).first;
}

Status TraceChecker::CheckReduceScatter(const Event& event) {
  if (phase_ != Phase::kBackward) {
    return Broken(Inconsistency::kRsOutsideBackward,
                  InvalidTrace(fmt::format("event {}: rs outside backward (phase is '{}')",
                                           event.index, PhaseName(phase_))));
  }
  if (event.shard_mode != ShardMode::kAccumulate) {
    std::uint32_t param = header_->ParamIndex(event.fsdp, event.param);
    if (holds_grad_[param]) {
      last_broken_ = Inconsistency::kRsOnHeldGradient;
      return InvalidTrace(fmt::format(
          "event {}: rs: shard '{}' for fsdp {} param {}, which still holds a reduced gradient "
          "(no zero_grad(set_to_none=True) since); FSDP accumulates into it: use shard "
          "'accumulate'",
          event.index, ShardModeName(event.shard_mode), event.fsdp, event.param));
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
  for (const auto& [id, state] : ids_) {
    if (!state.live) continue;
    summary_.alive_at_end_bytes[static_cast<int>(state.category)] += state.bytes;
    ++summary_.alive_at_end_count[static_cast<int>(state.category)];
  }
  return next_ ? next_->OnEnd() : Status::Ok();
}

}  // namespace bucketsim
