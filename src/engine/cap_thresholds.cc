#include "engine/cap_thresholds.h"

#include <algorithm>

#include "core/dtype.h"
#include "engine/trace_checker.h"
#include "policy/shard_size.h"

namespace bucketsim {
namespace {

constexpr double kMib = 1024.0 * 1024.0;

}  // namespace

Status CapThresholdScan::OnHeader(const TraceHeader& header) {
  header_ = &header;
  return Status::Ok();
}

Status CapThresholdScan::OnEvent(const Event& event) {
  if (event.kind == EventKind::kPhase && event.phase == Phase::kBackward) {
    thresholds_.StartBackward();
  }
  if (event.kind != EventKind::kReduceScatter) return Status::Ok();
  const ProcessGroup* group = header_->FindGroup(event.group);
  BUCKETSIM_CHECK(group != nullptr);  // the checker rejects an unknown group first
  thresholds_.AddRequest(event.numel, ElementSize(event.dtype), group->size(),
                         (MembersKey(*group) << 8) | static_cast<std::uint64_t>(event.dtype));
  return Status::Ok();
}

std::uint64_t CapThresholdScan::MembersKey(const ProcessGroup& group) {
  std::vector<int> members = group.ranks;
  std::sort(members.begin(), members.end());
  return keys_.try_emplace(std::move(members), keys_.size()).first->second;
}

double RequestSize::ThresholdCapMb() const {
  return static_cast<double>(numel * element_size * static_cast<Bytes>(world_size)) / kMib;
}

void CapThresholds::AddRequest(Numel numel, Bytes element_size, int world_size,
                               std::uint64_t bucket_key) {
  ++sizes_[{numel, element_size, world_size}];
  ++requests_;
  Bytes& sum = backward_bytes_[bucket_key];
  sum += numel * element_size * static_cast<Bytes>(world_size);
  largest_backward_bytes_ = std::max(largest_backward_bytes_, sum);
}

void CapThresholds::StartBackward() { backward_bytes_.clear(); }

std::uint64_t CapThresholds::BucketedAt(double cap_mb) const {
  std::uint64_t bucketed = 0;
  for (const auto& [size, count] : sizes_) {
    const auto& [numel, element_size, world_size] = size;
    if (numel <= BucketShardSize(cap_mb, element_size, world_size)) bucketed += count;
  }
  return bucketed;
}

std::vector<RequestSize> CapThresholds::Sizes() const {
  std::vector<RequestSize> sizes;
  for (const auto& [size, count] : sizes_) {
    const auto& [numel, element_size, world_size] = size;
    sizes.push_back({numel, element_size, world_size, count});
  }
  std::stable_sort(sizes.begin(), sizes.end(), [](const RequestSize& a, const RequestSize& b) {
    return a.ThresholdCapMb() < b.ThresholdCapMb();
  });
  return sizes;
}

std::optional<double> CapThresholds::SmallestBucketingCapMb() const {
  std::vector<RequestSize> sizes = Sizes();
  if (sizes.empty()) return std::nullopt;
  return sizes.front().ThresholdCapMb();
}

double CapThresholds::AllInOneBucketCapMb() const {
  return static_cast<double>(largest_backward_bytes_) / kMib;
}

Result<CapThresholds> ScanCapThresholds(const TraceSource& source) {
  CapThresholdScan scan;
  TraceChecker checker(&scan);
  TraceHeader header;
  BUCKETSIM_RETURN_IF_ERROR(source(header, checker));
  return scan.Take();
}

}  // namespace bucketsim
