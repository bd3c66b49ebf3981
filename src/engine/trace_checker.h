// The consistency rules of a trace that need memory of what came before, checked once for
// all replays: every free names a live allocation, ids are not allocated twice while live,
// reduce-scatters and flushes happen in backward, every backward's requests are flushed, and a
// reduced shard is kept as a view or a cast only by a parameter that holds no gradient yet.
// The checker also gives each live allocation a dense slot (Event::slot) so that replays index
// a vector instead of hashing ids, then forwards the event to the next sink.
//
// Its memory is bounded by what is live, not by the trace's length: it keeps the live ids (in a
// LiveIdIndex, with what it knows of each by slot), the last `remembered_frees` frees with the
// event of each (a double free of one of those names that event), and every id ever allocated
// only as ranges of ids (a free of one of those that is neither live nor recent is still a
// double free, without the event). Generated traces number allocations in order, so their ids
// make one range; imported traces use block addresses as ids, which the allocator reuses (an id
// may be allocated again once freed), so their ranges are bounded by the device's addresses.
// Only a free of an id that is not live looks at the recent frees: the common path pays one
// hash lookup per alloc and per free, and nothing per event grows with the trace.
//
// In front of a replay the checker rejects: the first broken rule stops the stream. For
// `bucketsim validate` it reports instead: every broken rule is counted by kind with the first
// few event indices, the offending event is not forwarded (a free of an unknown id frees
// nothing), and the stream goes on, so the user sees all the problems of a trace at once.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/event_sink.h"
#include "engine/live_id_index.h"
#include "engine/run_result.h"

namespace bucketsim {

// The rules a trace can break, named in reports by InconsistencyName.
enum class Inconsistency : std::uint8_t {
  kFreeOfUnknownId,
  kDoubleFree,
  kAllocOfLiveId,
  kRecordStreamOfDeadId,
  kIterationOrder,
  kFlushOutsideBackward,
  kRsOutsideBackward,
  kRsOnHeldGradient,
  kUnflushedRequests,
  // A trace collective (all_gather, all_reduce) on an id that is not live, or that moves more
  // bytes than its allocation holds.
  kCollectiveOutsideAllocation,
};
inline constexpr int kNumInconsistencies = 10;
// "free_of_unknown_id", "double_free", ...
std::string_view InconsistencyName(Inconsistency kind);

struct InconsistencyCount {
  Inconsistency kind = Inconsistency::kFreeOfUnknownId;
  std::uint64_t count = 0;
  std::vector<EventIndex> first_events;  // at most kFirstEvents, in trace order
  std::string first_message;             // the checker's message for the first one
  static constexpr std::size_t kFirstEvents = 5;
};

struct TraceSummary {
  std::uint64_t events = 0;
  std::array<std::uint64_t, kNumEventKinds> events_by_kind{};
  std::uint64_t iterations = 0;
  CategoryBytes allocated_bytes{};  // summed over every alloc event
  CategoryBytes alive_at_end_bytes{};
  std::array<std::uint64_t, kNumCategories> alive_at_end_count{};
  Bytes max_live_bytes = 0;  // requested bytes, before any rounding
  std::uint64_t max_live_allocations = 0;
  Micros compute_us = 0;
  std::vector<InconsistencyCount> inconsistencies;  // report mode only; by kind, first seen first
  std::uint64_t num_inconsistencies() const;
};

enum class CheckerMode { kReject, kReport };

class TraceChecker final : public EventSink {
 public:
  static constexpr std::size_t kRememberedFrees = 4096;

  // `next` may be null: then the checker only validates and summarises.
  explicit TraceChecker(EventSink* next, CheckerMode mode = CheckerMode::kReject,
                        std::size_t remembered_frees = kRememberedFrees)
      : next_(next),
        mode_(mode),
        remembered_frees_(remembered_frees),
        recent_frees_(remembered_frees) {}
  TraceChecker(const TraceChecker&) = delete;  // last_range_end_ points into allocated_ids_
  TraceChecker& operator=(const TraceChecker&) = delete;

  Status OnHeader(const TraceHeader& header) override;
  Status OnEvent(const Event& event) override;
  Status OnEnd() override;

  const TraceSummary& summary() const { return summary_; }
  // How many ids (or ranges of ids) the checker holds now: live ones, recently freed ones, and
  // ranges of every id allocated. Bounded by the live allocations, whatever the trace length.
  std::size_t remembered_ids() const {
    return live_ids_.size() + recent_count_ + allocated_ids_.size();
  }

 private:
  // What the checker knows of a live allocation, by slot.
  struct SlotState {
    Bytes bytes = 0;
    EventIndex allocated_at = 0;
    Category category = Category::kOther;
    bool live = false;
  };

  void Count(EventKind kind) {
    ++summary_.events;
    ++summary_.events_by_kind[static_cast<int>(kind)];
  }
  // After Check broke a rule: the error (reject mode), or the rule recorded (report mode) and the
  // event forwarded when it still applies.
  Status OnBroken(const Event& event, Status status);
  Status Check(Event& event);
  Status CheckOther(Event& event);  // the kinds Check does not handle inline
  Status AllocOfLiveId(const Event& event);
  // Remembers which rule `status` reports, for report mode.
  Status Broken(Inconsistency kind, Status status);
  void Record(Inconsistency kind, EventIndex index, const Status& status);
  Status CheckAlloc(Event& event);
  Status CheckFree(Event& event);
  // A free of an id that is not live: a double free (named by its event when it is one of the
  // recent frees) or a free of an id never allocated.
  Status FreeOfDeadId(const Event& event);
  // The event of the newest of the remembered frees of `id`, if any.
  std::optional<EventIndex> RecentFree(std::uint64_t id) const;
  void RememberFree(std::uint64_t id, EventIndex at);
  // Adds `id` to allocated_ids_.
  void RememberAllocated(std::uint64_t id);
  void AddAllocatedId(std::uint64_t id);  // RememberAllocated when `id` does not extend the last

  bool WasAllocated(std::uint64_t id) const;
  Status CheckReduceScatter(const Event& event);
  Status CheckTraceCollective(Event& event);
  Status CheckPhase(const Event& event);

  EventSink* next_;
  CheckerMode mode_;
  Inconsistency last_broken_ = Inconsistency::kFreeOfUnknownId;
  const TraceHeader* header_ = nullptr;
  TraceSummary summary_;
  std::size_t remembered_frees_;
  LiveIdIndex live_ids_;          // id -> slot
  std::vector<SlotState> slots_;  // by slot
  std::vector<std::uint32_t> free_slots_;
  // The last remembered_frees_ frees (id, event), a ring of that size allocated at once (64 KiB
  // by default): the oldest is overwritten first; the first recent_count_ written are valid.
  std::vector<std::pair<std::uint64_t, EventIndex>> recent_frees_;
  std::size_t next_recent_ = 0;  // where the next free goes
  std::size_t recent_count_ = 0;
  std::map<std::uint64_t, std::uint64_t> allocated_ids_;  // first id -> last id
  std::uint64_t* last_range_end_ = nullptr;  // the last id of allocated_ids_' last range
  std::uint32_t num_slots_ = 0;
  Bytes live_bytes_ = 0;
  std::uint64_t live_count_ = 0;
  Phase phase_ = Phase::kInit;
  bool seen_iteration_ = false;
  std::uint64_t iteration_ = 0;
  std::uint64_t unflushed_requests_ = 0;
  EventIndex first_unflushed_ = 0;
  std::vector<bool> holds_grad_;  // per parameter (TraceHeader::ParamIndex)
};

}  // namespace bucketsim
