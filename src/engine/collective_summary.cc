#include "engine/collective_summary.h"

#include <algorithm>

namespace bucketsim {
namespace {

void Count(CollectiveCount& count, Bytes bytes) {
  ++count.count;
  count.bytes += bytes;
}

}  // namespace

void CollectiveSummary::Add(std::uint64_t iteration, Phase phase, const CollectiveRecord& record) {
  totals.Add(record);
  if (phases.empty() || phases.back().iteration != iteration || phases.back().phase != phase) {
    phases.push_back({iteration, phase, {}, {}, {}});
  }
  PhaseCollectives& stretch = phases.back();
  const Bytes bytes = SendBytes(record);
  Count(stretch.total, bytes);
  Count(stretch.by_kind[static_cast<int>(record.kind)], bytes);
  auto group = std::find_if(stretch.by_group.begin(), stretch.by_group.end(),
                            [&](const GroupCollectives& g) { return g.group == record.group; });
  if (group == stretch.by_group.end()) {
    stretch.by_group.push_back({record.group, record.group_size, {}});
    group = stretch.by_group.end() - 1;
  }
  Count(group->total, bytes);
}

}  // namespace bucketsim
