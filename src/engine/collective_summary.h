// What a replay's collectives amount to: per stretch of the trace between two phase markers, how
// many, how many bytes and of which kind; per process group over the whole replay, how many and
// how many bytes. It is what a report shows of the collective log by default: its size grows
// with the number of iterations and of groups, never with the number of collectives, so a
// ten-million-event trace costs kilobytes here. The full log (one record per
// collective, RunResult::collectives) is kept only when asked for (--full-log).
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/collective_record.h"
#include "core/event.h"

namespace bucketsim {

struct CollectiveCount {
  std::uint64_t count = 0;
  Bytes bytes = 0;  // SendBytes summed
};

struct GroupCollectives {
  GroupId group = 0;
  int group_size = 1;
  CollectiveCount total;
};

// The collectives issued in one stretch (iteration, phase) of the trace.
struct PhaseCollectives {
  std::uint64_t iteration = 0;
  Phase phase = Phase::kInit;
  CollectiveCount total;
  std::array<CollectiveCount, kNumCollectiveKinds> by_kind{};  // by CollectiveKind
};

class CollectiveSummary {
 public:
  void Add(std::uint64_t iteration, Phase phase, const CollectiveRecord& record);

  const CollectiveTotals& totals() const { return totals_; }
  // One entry per stretch that issued a collective, in trace order; a stretch is a new entry
  // when the iteration or the phase changes, as RunResult::phases counts them.
  const std::vector<PhaseCollectives>& phases() const { return phases_; }
  // Per group, in the order groups first issued a collective.
  const std::vector<GroupCollectives>& groups() const { return groups_; }

  // A summary as a report wrote it, read back (io/report_reader): the stretches and groups as
  // they were, and totals of their counts and bytes (a report does not keep the bus bytes).
  static CollectiveSummary Restored(std::vector<PhaseCollectives> phases,
                                    std::vector<GroupCollectives> groups);

 private:
  CollectiveTotals totals_;
  std::vector<PhaseCollectives> phases_;
  std::vector<GroupCollectives> groups_;
  std::unordered_map<GroupId, std::size_t> group_index_;
};

}  // namespace bucketsim
