// The consistency rules of a trace that need memory of what came before, checked once for
// all replays: every free names a live allocation, ids are not allocated twice while live,
// reduce-scatters and flushes happen in backward, every backward's requests are flushed, and a
// reduced shard is kept as a view or a cast only by a parameter that holds no gradient yet.
// The checker also gives each live allocation a dense slot (Event::slot) so that replays index
// a vector instead of hashing ids, then forwards the event to the next sink.
#pragma once

#include <array>
#include <unordered_map>
#include <vector>

#include "core/event_sink.h"
#include "engine/run_result.h"

namespace bucketsim {

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
};

class TraceChecker final : public EventSink {
 public:
  // `next` may be null: then the checker only validates and summarises.
  explicit TraceChecker(EventSink* next) : next_(next) {}

  Status OnHeader(const TraceHeader& header) override;
  Status OnEvent(const Event& event) override;
  Status OnEnd() override;

  const TraceSummary& summary() const { return summary_; }

 private:
  struct IdState {
    std::uint32_t slot = 0;
    bool live = false;
    Category category = Category::kOther;
    Bytes bytes = 0;
    EventIndex last_event = 0;  // allocated at, or freed at when not live
  };

  Status Check(Event& event);
  Status CheckAlloc(Event& event);
  Status CheckFree(Event& event);
  Status CheckReduceScatter(const Event& event);
  Status CheckPhase(const Event& event);

  EventSink* next_;
  const TraceHeader* header_ = nullptr;
  TraceSummary summary_;
  std::unordered_map<std::uint64_t, IdState> ids_;
  std::vector<std::uint32_t> free_slots_;
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
