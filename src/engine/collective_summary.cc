#include "engine/collective_summary.h"

namespace bucketsim {
namespace {

void Count(CollectiveCount& count, Bytes bytes) {
  ++count.count;
  count.bytes += bytes;
}

}  // namespace

void CollectiveSummary::Add(std::uint64_t iteration, Phase phase, const CollectiveRecord& record) {
  totals_.Add(record);
  if (phases_.empty() || phases_.back().iteration != iteration || phases_.back().phase != phase) {
    phases_.push_back({iteration, phase, {}, {}});
  }
  const Bytes bytes = SendBytes(record);
  Count(phases_.back().total, bytes);
  Count(phases_.back().by_kind[static_cast<int>(record.kind)], bytes);
  auto [group, added] = group_index_.try_emplace(record.group, groups_.size());
  if (added) groups_.push_back({record.group, record.group_size, {}});
  Count(groups_[group->second].total, bytes);
}

CollectiveSummary CollectiveSummary::Restored(std::vector<PhaseCollectives> phases,
                                              std::vector<GroupCollectives> groups) {
  CollectiveSummary summary;
  for (const PhaseCollectives& phase : phases) {
    summary.totals_.count += phase.total.count;
    summary.totals_.bytes += phase.total.bytes;
  }
  for (std::size_t i = 0; i < groups.size(); ++i) summary.group_index_[groups[i].group] = i;
  summary.phases_ = std::move(phases);
  summary.groups_ = std::move(groups);
  return summary;
}

}  // namespace bucketsim
