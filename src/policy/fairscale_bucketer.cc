#include "policy/fairscale_bucketer.h"

#include <algorithm>

#include <fmt/format.h>

#include "policy/shard_size.h"

namespace bucketsim {

FairscaleBucketer::FairscaleBucketer(Lifetime lifetime, KeyMode key, double bucket_cap_mb)
    : lifetime_(lifetime), key_mode_(key), bucket_cap_mb_(bucket_cap_mb) {}

GroupId FairscaleBucketer::KeyGroup(const ProcessGroup& group) {
  if (key_mode_ == KeyMode::kIdentity) return group.id;
  auto cached = key_group_.find(group.id);
  if (cached != key_group_.end()) return cached->second;
  std::vector<int> members = group.ranks;
  std::sort(members.begin(), members.end());
  GroupId key = group_by_members_.try_emplace(std::move(members), group.id).first->second;
  key_group_.emplace(group.id, key);
  return key;
}

Status FairscaleBucketer::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const Event& e = call.event;
  if (e.numel == 0) {
    // fairscale queues a zero-size callback at offset 0 and then asserts in flush (§9); a trace
    // must not contain one (the reader rejects it), so reaching here is a bug.
    return InvalidTrace(fmt::format("event {}: rs: zero-size reduce-scatter", e.index));
  }
  Numel shard_size = BucketShardSize(bucket_cap_mb_, ElementSize(e.dtype), call.group->size());
  if (e.numel > shard_size) return Bypass(call, e.numel, host);

  Bucket& bucket = GetBucket(call, shard_size, host);
  if (e.numel > bucket.shard_size - bucket.offset) FlushBucket(bucket, host);
  Bytes element = ElementSize(e.dtype);
  const int ws = call.group->size();
  // stacked = torch.stack(input_list); data[:, offset:offset + n].copy_(stacked)
  BufferId stacked =
      host.Allocate(ws * e.numel * element, Category::kRsStackTemp, e.dtype, bucket.group->id);
  host.FillGradient({stacked, e.index, ws, e.numel, e.dtype});
  host.Copy(
      {*bucket.data, bucket.shard_size, bucket.offset, stacked, e.numel, 0, ws, e.numel, e.dtype});
  host.Release(stacked);
  bucket.callbacks.push_back(call);
  bucket.offset += e.numel;
  ++counters_.bucketed;
  return Status::Ok();
}

Status FairscaleBucketer::Bypass(const ReduceScatterCall& call, Numel n, PolicyHost& host) {
  const Event& e = call.event;
  const int ws = call.group->size();
  Bytes element = ElementSize(e.dtype);
  // Order observed in fairscale (§9): the output first, then the cat temporary.
  BufferId output = host.Allocate(n * element, Category::kBypassOutput, e.dtype, call.group->id);
  BufferId flattened =
      host.Allocate(ws * n * element, Category::kRsCatTemp, e.dtype, call.group->id);
  host.FillGradient({flattened, e.index, ws, n, e.dtype});
  const ReducedSlice slice{e.index, 0, n};
  host.Collective({CollectiveKind::kBypass, call.group->id, ws, e.dtype, ws * n, n, 1},
                  {flattened, output, {&slice, 1}});
  host.Deliver(call, output);
  // Both are locals of reduce_scatter_async: let go when it returns, after the callback.
  host.Release(output);
  host.Release(flattened);
  ++counters_.bypasses;
  return Status::Ok();
}

FairscaleBucketer::Bucket& FairscaleBucketer::GetBucket(const ReduceScatterCall& call,
                                                        Numel shard_size, PolicyHost& host) {
  Key key{call.event.dtype, KeyGroup(*call.group)};
  auto [it, created] = bucket_index_.try_emplace(key, buckets_.size());
  if (created) {
    Bucket bucket;
    bucket.group = call.group;
    bucket.dtype = call.event.dtype;
    bucket.shard_size = shard_size;
    buckets_.push_back(std::move(bucket));
    ++counters_.buckets;
  }
  Bucket& bucket = buckets_[it->second];
  // _get_bucket calls setup() on every bucketed call; on a new bucket the constructor has
  // already allocated data and then the output shard, in the same order setup() regrows them.
  Setup(bucket, host);
  return bucket;
}

void FairscaleBucketer::Setup(Bucket& bucket, PolicyHost& host) {
  const int ws = bucket.group->size();
  Bytes element = ElementSize(bucket.dtype);
  if (!bucket.data) {
    bucket.data = host.Allocate(ws * bucket.shard_size * element, Category::kBucketData,
                                bucket.dtype, bucket.group->id);
  }
  if (!bucket.output) {
    bucket.output = host.Allocate(bucket.shard_size * element, Category::kBucketOutput,
                                  bucket.dtype, bucket.group->id);
  }
}

void FairscaleBucketer::FlushBucket(Bucket& bucket, PolicyHost& host) {
  if (bucket.offset == 0) return;
  const int ws = bucket.group->size();
  Bytes element = ElementSize(bucket.dtype);
  // data[:, :offset] is a strided slice unless it spans every column or there is one row.
  std::optional<BufferId> contiguous;
  if (bucket.offset < bucket.shard_size && ws > 1) {
    contiguous = host.Allocate(ws * bucket.offset * element, Category::kRsContiguousTemp,
                               bucket.dtype, bucket.group->id);
    host.Copy({*contiguous, bucket.offset, 0, *bucket.data, bucket.shard_size, 0, ws, bucket.offset,
               bucket.dtype});
  }
  // Each callback's shard is the next run of columns, in the order the requests were queued.
  slices_.clear();
  Numel column = 0;
  for (const ReduceScatterCall& callback : bucket.callbacks) {
    slices_.push_back({callback.event.index, column, callback.event.numel});
    column += callback.event.numel;
  }
  host.Collective(
      {CollectiveKind::kBucketFlush, bucket.group->id, ws, bucket.dtype, ws * bucket.offset,
       bucket.offset, static_cast<std::uint32_t>(bucket.callbacks.size())},
      {contiguous.value_or(*bucket.data), *bucket.output, slices_});
  if (contiguous) host.Release(*contiguous);
  for (const ReduceScatterCall& callback : bucket.callbacks) host.Deliver(callback, *bucket.output);
  bucket.callbacks.clear();
  bucket.offset = 0;
  // self.output_shard = torch.zeros_like(self.data[0]): the new shard exists before the
  // assignment drops the old one.
  BufferId fresh = host.Allocate(bucket.shard_size * element, Category::kBucketOutput, bucket.dtype,
                                 bucket.group->id);
  host.Relabel(*bucket.output, Category::kRetiredOutput);
  host.Release(*bucket.output);
  bucket.output = fresh;
  ++counters_.flushes;
}

Status FairscaleBucketer::Flush(PolicyHost& host) {
  for (Bucket& bucket : buckets_) FlushBucket(bucket, host);
  return Status::Ok();
}

Status FairscaleBucketer::Teardown(PolicyHost& host) {
  for (Bucket& bucket : buckets_) {
    if (bucket.offset != 0 || !bucket.callbacks.empty()) {
      return InvalidTrace(fmt::format(
          "teardown of a non-empty bucket ({} group {}: {} elements, {} callbacks pending); "
          "fairscale asserts 'Incorrect call of teardown'",
          DTypeName(bucket.dtype), bucket.group->id, bucket.offset, bucket.callbacks.size()));
    }
  }
  for (Bucket& bucket : buckets_) {
    if (bucket.data) host.Release(*bucket.data);
    if (bucket.output) host.Release(*bucket.output);
    bucket.data.reset();
    bucket.output.reset();
  }
  return Status::Ok();
}

Status FairscaleBucketer::EndBackward(PolicyHost& host) {
  BUCKETSIM_RETURN_IF_ERROR(Flush(host));
  // Before #633 there was no teardown: buffers stay for the life of the bucketer.
  if (lifetime_ == Lifetime::kAlways) return Status::Ok();
  return Teardown(host);
}

}  // namespace bucketsim
