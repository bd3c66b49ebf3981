#include "engine/snapshot_comparison.h"

#include <algorithm>

#include "backend/sim/sim_backend.h"
#include "memory/exact_memory_model.h"

namespace bucketsim {
namespace {

SegmentAction ActionOf(EventKind kind) {
  switch (kind) {
    case EventKind::kSegmentFree:
      return SegmentAction::kFree;
    case EventKind::kSegmentMap:
      return SegmentAction::kMap;
    case EventKind::kSegmentUnmap:
      return SegmentAction::kUnmap;
    default:
      return SegmentAction::kAlloc;
  }
}

bool IsSegmentEvent(EventKind kind) {
  return kind == EventKind::kSegmentAlloc || kind == EventKind::kSegmentFree ||
         kind == EventKind::kSegmentMap || kind == EventKind::kSegmentUnmap;
}

// A snapshot has no FSDP semantics: the replays' policy never runs (the trace has no rs), any
// one does.
PolicySpec AnyPolicy() {
  PolicySpec spec;
  spec.name = "backward-only";
  return spec;
}

}  // namespace

SnapshotComparison::SnapshotComparison(CachingFactory make_caching)
    : make_caching_(std::move(make_caching)) {}

SnapshotComparison::~SnapshotComparison() = default;

Status SnapshotComparison::OnHeader(const TraceHeader& header) {
  Result<std::unique_ptr<MemoryModel>> caching = make_caching_(header);
  if (!caching.ok()) return caching.status();
  ReplayOptions options;
  options.keep_collective_log = false;
  auto exact = std::make_unique<ExactMemoryModel>();
  exact_ = exact.get();
  exact_replay_ = std::make_unique<Replay>(AnyPolicy(), header.bucket_cap_mb, std::move(exact),
                                           std::make_unique<SimBackend>(), options);
  caching_ = caching->get();
  caching_->set_segment_observer(this);
  caching_replay_ = std::make_unique<Replay>(AnyPolicy(), header.bucket_cap_mb, std::move(*caching),
                                             std::make_unique<SimBackend>(), options);
  BUCKETSIM_RETURN_IF_ERROR(exact_replay_->OnHeader(header));
  return caching_replay_->OnHeader(header);
}

void SnapshotComparison::OnSegmentEvent(const SegmentEvent& event) {
  predicted_.push_back({event.action, event.bytes, event.stream, event.address});
}

void SnapshotComparison::ObserveSegment(const Event& event) {
  const SegmentAction action = ActionOf(event.kind);
  observed_.push_back({action, event.bytes, event.stream, event.id});
  if (action == SegmentAction::kAlloc || action == SegmentAction::kMap) {
    observed_reserved_ += event.bytes;
  } else {
    // A dump that starts mid-run may free a segment it never saw allocated; the importer
    // synthesizes those at the start, so this only guards a hand-written trace.
    observed_reserved_ -= std::min(observed_reserved_, event.bytes);
  }
  agreement_.observed_peak_reserved_bytes =
      std::max(agreement_.observed_peak_reserved_bytes, observed_reserved_);
}

Status SnapshotComparison::OnEvent(const Event& event) {
  ++events_;
  if (IsObservedEvent(event.kind)) {
    ++agreement_.observed_events;
    if (IsSegmentEvent(event.kind)) ObserveSegment(event);
    if (event.kind == EventKind::kOom) {
      if (agreement_.observed_ooms++ == 0) agreement_.first_observed_oom = event.index;
    }
    if (event.kind == EventKind::kSnapshot && event.has_totals) {
      agreement_.observed_totals = ObservedTotals{event.numel, event.group, event.id, event.bytes};
    }
    return Status::Ok();
  }
  BUCKETSIM_RETURN_IF_ERROR(exact_replay_->OnEvent(event));
  BUCKETSIM_RETURN_IF_ERROR(caching_replay_->OnEvent(event));
  if (event.kind == EventKind::kAlloc) {
    expected_allocated_ += RoundUpToBlock(event.bytes);
    live_requested_ += event.bytes;
  }
  if (event.kind == EventKind::kFree) {  // the checker put the allocation's bytes on its free
    expected_allocated_ -= RoundUpToBlock(event.bytes);
    live_requested_ -= event.bytes;
  }
  ++agreement_.allocated_events_checked;
  if (exact_->allocated_bytes() == expected_allocated_) {
    ++agreement_.allocated_events_matching;
  } else if (!agreement_.first_allocated_mismatch) {
    agreement_.first_allocated_mismatch =
        AllocatedMismatch{event.index, exact_->allocated_bytes(), expected_allocated_};
  }
  agreement_.predicted_peak_reserved_bytes =
      std::max(agreement_.predicted_peak_reserved_bytes, caching_->reserved_bytes());
  CompareSegments(event.index);
  return Status::Ok();
}

void SnapshotComparison::CompareSegments(EventIndex at) {
  agreement_.predicted_segment_events += predicted_.size();
  agreement_.observed_segment_events += observed_.size();
  std::vector<bool> used(predicted_.size(), false);
  for (const SegmentRecord& o : observed_) {
    for (std::size_t i = 0; i < predicted_.size(); ++i) {
      if (used[i] || !predicted_[i].Matches(o)) continue;
      used[i] = true;
      ++agreement_.matching_segment_events;
      break;
    }
  }
  if (!agreement_.first_divergence) {
    const std::size_t n = std::max(predicted_.size(), observed_.size());
    for (std::size_t i = 0; i < n; ++i) {
      const bool have_p = i < predicted_.size();
      const bool have_o = i < observed_.size();
      if (have_p && have_o && predicted_[i].Matches(observed_[i])) continue;
      SegmentDivergence d{at, i, std::nullopt, std::nullopt};
      if (have_p) d.predicted = predicted_[i];
      if (have_o) d.observed = observed_[i];
      agreement_.first_divergence = d;
      break;
    }
  }
  predicted_.clear();
  observed_.clear();
}

Status SnapshotComparison::OnEnd() {
  // Observed events after the last operation belong to none: they are compared with nothing.
  CompareSegments(events_);
  BUCKETSIM_RETURN_IF_ERROR(exact_replay_->OnEnd());
  BUCKETSIM_RETURN_IF_ERROR(caching_replay_->OnEnd());
  agreement_.exact_final_allocated_bytes = exact_->allocated_bytes();
  agreement_.final_requested_bytes = live_requested_;
  agreement_.predicted_final_allocated_bytes = caching_->allocated_bytes();
  agreement_.predicted_final_reserved_bytes = caching_->reserved_bytes();
  agreement_.observed_final_reserved_bytes = observed_reserved_;
  RunResult caching = caching_replay_->TakeResult();
  if (caching.oom) agreement_.predicted_oom = caching.oom->event_index;
  return Status::Ok();
}

}  // namespace bucketsim

namespace bucketsim {

bool SnapshotComparison::AccountingDisagrees() const {
  const SnapshotAgreement& a = agreement_;
  if (a.first_allocated_mismatch) return true;
  return a.observed_totals && a.observed_totals->requested_bytes != a.final_requested_bytes;
}

}  // namespace bucketsim
