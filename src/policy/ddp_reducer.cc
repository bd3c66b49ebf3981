#include "policy/ddp_reducer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

namespace bucketsim {

std::vector<std::vector<std::size_t>> DdpBucketAssignment(const std::vector<DdpTensor>& tensors,
                                                          const std::vector<Bytes>& limits) {
  BUCKETSIM_CHECK(!limits.empty());
  struct Accumulator {
    std::vector<std::size_t> indices;
    Bytes bytes = 0;
    std::size_t limit = 0;  // index into `limits`
  };
  std::map<DType, Accumulator> open;  // DDP's BucketKey(dtype, device); one device here
  std::vector<std::vector<std::size_t>> result;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    Accumulator& bucket = open[tensors[i].dtype];
    bucket.indices.push_back(i);
    bucket.bytes += tensors[i].bytes;
    if (bucket.bytes < limits[bucket.limit]) continue;
    result.push_back(std::move(bucket.indices));
    // The next limit for this dtype; the last one repeats.
    std::size_t limit = std::min(bucket.limit + 1, limits.size() - 1);
    bucket = Accumulator{};
    bucket.limit = limit;
  }
  for (auto& [dtype, bucket] : open) {
    if (!bucket.indices.empty()) result.push_back(std::move(bucket.indices));
  }
  return result;
}

DdpReducer::DdpReducer(double bucket_cap_mb, double first_bucket_mb, bool gradient_as_bucket_view)
    // DDP: bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024); the first bucket's 1 MiB is
    // dist._DEFAULT_FIRST_BUCKET_BYTES.
    : cap_bytes_(static_cast<Bytes>(std::max(0.0, bucket_cap_mb) * 1024 * 1024)),
      first_bytes_(static_cast<Bytes>(std::max(0.0, first_bucket_mb) * 1024 * 1024)),
      as_view_(gradient_as_bucket_view) {}

Status DdpReducer::Start(const TraceHeader& header) {
  header_ = &header;
  for (const UnitInfo& instance : header.units) {
    for (const ParamInfo& param : instance.params) params_.push_back(param);
  }
  locators_.assign(params_.size(), {});
  seen_.assign(params_.size(), false);
  param_grads_.assign(params_.size(), std::nullopt);
  // Construction: one bucket per dtype ([sys.maxsize]) over the parameters in model order,
  // sorted by their smallest index, then reversed (_ddp_init_helper).
  std::vector<std::uint32_t> model_order(params_.size());
  for (std::uint32_t i = 0; i < model_order.size(); ++i) model_order[i] = i;
  Assign(model_order, {std::numeric_limits<Bytes>::max()});
  std::sort(buckets_.begin(), buckets_.end(),
            [](const Bucket& a, const Bucket& b) { return a.params.front() < b.params.front(); });
  std::reverse(buckets_.begin(), buckets_.end());
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (std::uint32_t param : buckets_[b].params) locators_[param].bucket = b;
  }
  return Status::Ok();
}

void DdpReducer::Assign(const std::vector<std::uint32_t>& order, const std::vector<Bytes>& limits) {
  std::vector<DdpTensor> tensors;
  for (std::uint32_t param : order) {
    tensors.push_back(
        {params_[param].numel * ElementSize(params_[param].dtype), params_[param].dtype});
  }
  buckets_.clear();
  for (const std::vector<std::size_t>& members : DdpBucketAssignment(tensors, limits)) {
    Bucket bucket;
    bucket.dtype = tensors[members.front()].dtype;
    for (std::size_t m : members) {
      std::uint32_t param = order[m];
      bucket.params.push_back(param);
      locators_[param] = {buckets_.size(), bucket.numel};
      bucket.numel += params_[param].numel;
    }
    buckets_.push_back(std::move(bucket));
  }
}

Status DdpReducer::BeginPhase(Phase phase, PolicyHost& host) {
  // DDP.forward -> reducer._rebuild_buckets(), once, after the first backward.
  if (phase != Phase::kForward || backwards_ == 0 || rebuilt_) return Status::Ok();
  rebuilt_ = true;
  std::vector<std::optional<BufferId>> old;
  for (Bucket& bucket : buckets_) old.push_back(bucket.gradients);
  // initialize_buckets: buckets_.clear() frees the old buckets unless .grad views hold them.
  if (!as_view_) {
    for (const std::optional<BufferId>& gradients : old) {
      if (gradients) host.Release(*gradients);
    }
  }
  // Parameters without a gradient (unused) follow, as finalize_backward marks them ready last.
  for (std::uint32_t param = 0; param < params_.size(); ++param) {
    if (!seen_[param]) ready_order_.push_back(param);
  }
  Assign(ready_order_, {first_bytes_, cap_bytes_});
  for (Bucket& bucket : buckets_) {
    bucket.gradients = host.Allocate(bucket.numel * ElementSize(bucket.dtype),
                                     Category::kBucketData, bucket.dtype, group_id_.value_or(0));
  }
  if (as_view_) {
    for (const std::optional<BufferId>& gradients : old) {
      if (gradients) host.Release(*gradients);
    }
  }
  counters_.buckets = buckets_.size();
  return Status::Ok();
}

Status DdpReducer::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const Event& e = call.event;
  const std::uint32_t param = header_->ParamIndex(e.unit, e.param);
  if (backwards_ == 0 && !seen_[param]) {
    // The autograd hook order of the first backward: what _rebuild_buckets lays out.
    seen_[param] = true;
    ready_order_.push_back(param);
  }
  if (!group_id_) group_id_ = call.group->id;  // the process group DDP was given
  const Locator& at = locators_[param];
  Bucket& bucket = buckets_[at.bucket];
  const Bytes element = ElementSize(bucket.dtype);
  if (!bucket.gradients) {
    bucket.gradients = host.Allocate(bucket.numel * element, Category::kBucketData, bucket.dtype,
                                     group_id_.value_or(0));
    counters_.buckets = std::max<std::uint64_t>(counters_.buckets, at.bucket + 1);
  }
  if (bucket.ready == 0) bucket.group = call.group;
  const Numel numel = params_[param].numel;
  if (!as_view_ && !param_grads_[param]) {
    // param.grad: a tensor of its own, kept by the module (zero_grad(set_to_none=False)).
    param_grads_[param] =
        host.Allocate(numel * element, Category::kGradShard, bucket.dtype, call.group->id);
  }
  // copy_grad_to_bucket (or autograd writing into the bucket view): the gradient's values at
  // its offset, as one row of the unsharded gradient.
  host.FillGradient({*bucket.gradients, e.index, 1, numel, bucket.dtype, at.offset, 0});
  bucket.slices.push_back({e.index, at.offset, numel});
  ++bucket.ready;
  ++counters_.bucketed;
  // mark_bucket_ready: launch every ready bucket from next_bucket_ on, in order.
  while (next_bucket_ < buckets_.size() &&
         buckets_[next_bucket_].ready == buckets_[next_bucket_].params.size()) {
    Launch(buckets_[next_bucket_++], host);
  }
  return Status::Ok();
}

void DdpReducer::Launch(Bucket& bucket, PolicyHost& host) {
  if (bucket.ready == 0) return;  // no gradient this iteration (an unused parameter's bucket)
  const ProcessGroup& group = *bucket.group;
  // allreduce of bucket.gradients, in place; the reduced values are .grad (a view, or copied
  // back into param.grad: finalize_bucket_dense).
  host.Collective({CollectiveKind::kAllReduce, group.id, group.size(), bucket.dtype, bucket.numel,
                   bucket.numel, static_cast<std::uint32_t>(bucket.ready)},
                  {*bucket.gradients, *bucket.gradients, bucket.slices});
  bucket.slices.clear();
  bucket.ready = 0;
  ++counters_.flushes;
}

Status DdpReducer::EndBackward(PolicyHost& host) {
  // finalize_backward: every bucket has been launched; one still incomplete is launched now.
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) Launch(buckets_[next_bucket_], host);
  next_bucket_ = 0;
  ++backwards_;
  return Status::Ok();
}

}  // namespace bucketsim
