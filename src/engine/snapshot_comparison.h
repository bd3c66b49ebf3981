// How well bucketsim reproduces a recorded run: a trace imported from a PyTorch memory snapshot
// (tools/snapshot_to_trace.py) carries what the real allocator did as observed events
// (segment_alloc/free/map/unmap, oom, snapshot). SnapshotComparison is the sink that replays
// such a trace twice in one pass and compares, event by event:
//
//  (a) allocated bytes. The snapshot's own accounting of allocated memory is the running sum, over
//      the kept device trace, of each live allocation's recorded size rounded up to the 512 B
//      block granularity (alloc adds, free_requested — the trace's `free` — subtracts; blocks
//      alive before the first kept event are synthesized at the start by the importer). The
//      replay with the exact model must give that figure after every event.
//  (b) segments. Every segment the caching model allocates, frees, maps or unmaps (a
//      SegmentObserver on the model) is attributed to the trace event whose replay made it; an
//      observed segment event is attributed to the next non-observed event, the operation it
//      belongs to (PyTorch writes segment_alloc before its alloc, and the importer writes a burst
//      of segment_free before the empty_cache it synthesizes). Per event, the predicted and the
//      observed lists are compared by (action, bytes, stream): addresses are the devices' own and
//      are not compared (reference/caching_allocator.md §2.4, §5.5).
//  and reserved memory: the observed running sum of segment bytes against the model's.
//
// Replays ignore observed events, so the figures of both replays are those of any other replay.
// The comparison owns its replays; it is given the caching model to use (any --alloc-conf,
// --device-memory: the what-if of a recorded run).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "core/event_sink.h"
#include "engine/replay.h"
#include "memory/memory_model.h"
#include "memory/segment_observer.h"

namespace bucketsim {

struct SegmentRecord {
  SegmentAction action = SegmentAction::kAlloc;
  Bytes bytes = 0;
  StreamId stream = 0;
  Bytes address = 0;  // the model's or the device's: shown, never compared

  bool Matches(const SegmentRecord& other) const {
    return action == other.action && bytes == other.bytes && stream == other.stream;
  }
};

// The first event at which the model's segment events differ from the observed ones: the first
// position in that event's two lists where they differ (a missing side: none there).
struct SegmentDivergence {
  EventIndex event_index = 0;  // the event both lists are attributed to (the trace's length: end)
  std::size_t position = 0;    // within that event's lists
  std::optional<SegmentRecord> predicted;
  std::optional<SegmentRecord> observed;
};

struct AllocatedMismatch {
  EventIndex event_index = 0;
  Bytes replayed_bytes = 0;  // the exact model's allocated bytes after the event
  Bytes expected_bytes = 0;  // the snapshot's accounting after the event
};

// The dump's own figures (its `segments`), from the trace's final snapshot event: allocated,
// reserved and active as PyTorch sums them; requested over the allocated blocks only (what the
// trace's allocations alive at the end must add up to).
struct ObservedTotals {
  Bytes allocated_bytes = 0;
  Bytes reserved_bytes = 0;
  Bytes requested_bytes = 0;
  Bytes active_bytes = 0;
};

struct SnapshotAgreement {
  std::uint64_t observed_events = 0;  // all observed events; 0: not an imported snapshot

  // (a) allocated bytes after every replayed event, exact model against the snapshot.
  std::uint64_t allocated_events_checked = 0;
  std::uint64_t allocated_events_matching = 0;
  std::optional<AllocatedMismatch> first_allocated_mismatch;
  Bytes exact_final_allocated_bytes = 0;
  Bytes final_requested_bytes = 0;  // requested sizes of the allocations alive at the end

  // (b) segment events, caching model against the snapshot.
  std::uint64_t predicted_segment_events = 0;
  std::uint64_t observed_segment_events = 0;
  std::uint64_t matching_segment_events = 0;  // per event, the multiset intersection
  std::optional<SegmentDivergence> first_divergence;

  // Reserved memory, predicted (caching model) against observed (running segment sum).
  Bytes predicted_peak_reserved_bytes = 0;
  Bytes predicted_final_reserved_bytes = 0;
  Bytes predicted_final_allocated_bytes = 0;
  Bytes observed_peak_reserved_bytes = 0;
  Bytes observed_final_reserved_bytes = 0;
  std::optional<ObservedTotals> observed_totals;

  std::uint64_t observed_ooms = 0;
  std::optional<EventIndex> first_observed_oom;  // the oom event's index
  std::optional<EventIndex> predicted_oom;       // the event the caching replay ran out at
};

class SnapshotComparison final : public EventSink, private SegmentObserver {
 public:
  // Makes the caching model once the header is known (its alloc_conf may be the default).
  using CachingFactory = std::function<Result<std::unique_ptr<MemoryModel>>(const TraceHeader&)>;
  explicit SnapshotComparison(CachingFactory make_caching);
  ~SnapshotComparison() override;

  Status OnHeader(const TraceHeader& header) override;
  Status OnEvent(const Event& event) override;
  Status OnEnd() override;

  // Valid after OnEnd.
  const SnapshotAgreement& agreement() const { return agreement_; }
  // Whether the trace's own accounting disagrees with the snapshot: allocated bytes after some
  // event, or the requested bytes alive at the end against the dump's (a broken import).
  bool AccountingDisagrees() const;

 private:
  void OnSegmentEvent(const SegmentEvent& event) override;
  void CompareSegments(EventIndex at);
  void ObserveSegment(const Event& event);

  CachingFactory make_caching_;
  MemoryModel* caching_ = nullptr;
  MemoryModel* exact_ = nullptr;
  std::unique_ptr<Replay> exact_replay_;
  std::unique_ptr<Replay> caching_replay_;
  std::vector<SegmentRecord> predicted_;  // of the event being replayed
  std::vector<SegmentRecord> observed_;   // since the last non-observed event
  Bytes expected_allocated_ = 0;
  Bytes live_requested_ = 0;
  Bytes observed_reserved_ = 0;
  EventIndex events_ = 0;
  SnapshotAgreement agreement_;
};

}  // namespace bucketsim
