#include "policy/zero_ipg_bucket.h"

#include <algorithm>

#include "policy/shard_size.h"

namespace bucketsim {

ZeroIpgBucket::ZeroIpgBucket(Stage stage, Numel reduce_bucket_size, bool overlap_comm)
    // ZeRO-3 keeps one flat buffer; overlap_comm there overlaps on a side stream, not by a
    // second buffer.
    : stage_(stage),
      capacity_(reduce_bucket_size),
      overlap_(overlap_comm && stage == Stage::kOneTwo) {}

Status ZeroIpgBucket::Start(const TraceHeader& header) {
  header_ = &header;
  for (const UnitInfo& instance : header.units) {
    for (const ParamInfo& param : instance.params) model_numel_[param.dtype] += param.numel;
  }
  return Status::Ok();
}

void ZeroIpgBucket::AllocateBuffers(Ipg& ipg, PolicyHost& host) {
  // buf_0 = torch.empty(int(self.reduce_bucket_size), dtype=self.dtype); buf_1 likewise with
  // overlap_comm.
  ipg.buffers.resize(overlap_ ? 2 : 1);
  for (std::optional<BufferId>& buffer : ipg.buffers) {
    if (!buffer) {
      buffer = host.Allocate(capacity_ * ElementSize(ipg.dtype), Category::kBucketData, ipg.dtype,
                             ipg.group->id);
    }
  }
}

Status ZeroIpgBucket::BeginPhase(Phase phase, PolicyHost& host) {
  // ZeRO-1/2 backward(): the IPG buffers of the optimizer, before loss.backward().
  if (phase != Phase::kBackward || stage_ != Stage::kOneTwo) return Status::Ok();
  for (Ipg& ipg : ipgs_) AllocateBuffers(ipg, host);
  return Status::Ok();
}

Status ZeroIpgBucket::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const Event& e = call.event;
  const ParamInfo& param = header_->units[e.unit].params[e.param];
  std::vector<int> members = call.group->ranks;
  std::sort(members.begin(), members.end());
  auto [it, created] = index_.try_emplace(Key{param.dtype, std::move(members)}, ipgs_.size());
  if (created) {
    Ipg ipg;
    ipg.group = call.group;
    ipg.dtype = param.dtype;
    ipgs_.push_back(std::move(ipg));
    ++counters_.buckets;
  }
  Ipg& ipg = ipgs_[it->second];
  AllocateBuffers(ipg, host);  // ZeRO-3's once; ZeRO-1/2's first backward
  const Numel numel = param.numel;
  // reduce_independent_p_g_buckets_and_remove_grads
  if (ipg.elements + numel > capacity_) {
    Reduce(ipg, host);
    if (overlap_) ipg.index = 1 - ipg.index;
  }
  if (numel > capacity_) {
    ReduceAlone(ipg, call, numel, host);
    return Status::Ok();
  }
  host.FillGradient({*ipg.buffers[ipg.index], e.index, 1, numel, ipg.dtype, ipg.elements, 0});
  ipg.slices.push_back({e.index, ipg.elements, numel});
  ipg.elements += numel;
  ++counters_.bucketed;
  return Status::Ok();
}

void ZeroIpgBucket::Reduce(Ipg& ipg, PolicyHost& host) {
  if (ipg.elements == 0) return;
  const int ws = ipg.group->size();
  // Rank p's range of the filled part; the last elements of a full bucket whose size is not a
  // multiple of the group size stay unreduced (the ranges must be equal).
  Numel per_rank = PaddedShardNumel(ipg.elements, ws);
  if (per_rank * ws > capacity_) per_rank = capacity_ / ws;
  const BufferId buffer = *ipg.buffers[ipg.index];
  host.Collective({CollectiveKind::kReduceScatter, ipg.group->id, ws, ipg.dtype, per_rank * ws,
                   per_rank, static_cast<std::uint32_t>(ipg.slices.size())},
                  {buffer, buffer, ipg.slices});
  KeepPartition(ipg, host);
  ipg.slices.clear();
  ipg.elements = 0;
  ++counters_.flushes;
}

void ZeroIpgBucket::ReduceAlone(Ipg& ipg, const ReduceScatterCall& call, Numel numel,
                                PolicyHost& host) {
  const int ws = ipg.group->size();
  const Numel per_rank = PaddedShardNumel(numel, ws);
  const Bytes element = ElementSize(ipg.dtype);
  BufferId alone =
      host.Allocate(per_rank * ws * element, Category::kRsCatTemp, ipg.dtype, ipg.group->id);
  host.FillGradient({alone, call.event.index, 1, numel, ipg.dtype, 0, 0});
  const ReducedSlice slice{call.event.index, 0, numel};
  host.Collective(
      {CollectiveKind::kReduceScatter, ipg.group->id, ws, ipg.dtype, per_rank * ws, per_rank, 1},
      {alone, alone, {&slice, 1}});
  KeepPartition(ipg, host);
  host.Release(alone);
  ++counters_.bypasses;
}

void ZeroIpgBucket::KeepPartition(Ipg& ipg, PolicyHost& host) {
  if (ipg.partition) return;
  // This rank's partition of every gradient of the dtype: ceil(numel / dp) elements.
  const Numel partition = PaddedShardNumel(model_numel_[ipg.dtype], ipg.group->size());
  ipg.partition = host.Allocate(partition * ElementSize(ipg.dtype), Category::kGradShard, ipg.dtype,
                                ipg.group->id);
}

Status ZeroIpgBucket::EndBackward(PolicyHost& host) {
  for (Ipg& ipg : ipgs_) {
    Reduce(ipg, host);
    ipg.index = 0;
    if (stage_ != Stage::kOneTwo) continue;
    // _release_ipg_buffers: self.ipg_buffer = None.
    for (std::optional<BufferId>& buffer : ipg.buffers) {
      if (buffer) host.Release(*buffer);
      buffer.reset();
    }
  }
  return Status::Ok();
}

}  // namespace bucketsim
