#include "policy/megatron_grad_buffer.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

namespace bucketsim {
namespace {

constexpr Numel Pad(Numel index, Numel divisor) {
  return (index + divisor - 1) / divisor * divisor;
}

}  // namespace

MegatronLayout LayOutMegatronBuffer(const std::vector<Numel>& numels, int dp,
                                    const MegatronLayoutOptions& options) {
  // DistributedDataParallel: bucket_size = max(40000000, 1000000 * dp) unless given; None
  // (one bucket) when overlap_grad_reduce is off.
  // 0: no limit.
  Numel bucket_size =
      options.bucket_size.value_or(std::max<Numel>(40'000'000, 1'000'000 * static_cast<Numel>(dp)));
  if (!options.overlap_grad_reduce) bucket_size = 0;
  const bool pad = options.distributed_optimizer;
  const Numel end_divisor =
      options.pad_for_high_nccl_busbw
          ? std::lcm(std::lcm(static_cast<Numel>(dp), Numel{128}), Numel{1} << 16)
          : std::lcm(static_cast<Numel>(dp), Numel{128});
  auto pad_end = [&](Numel end) { return pad ? Pad(end, end_divisor) : end; };
  MegatronLayout layout;
  layout.param_start.resize(numels.size());
  MegatronLayout::Bucket bucket;
  Numel param_start = 0;
  Numel param_end = 0;
  for (std::size_t i = 0; i < numels.size(); ++i) {
    if (pad) param_start = Pad(param_start, 64);  // _pad_start_of_param_if_needed
    param_end = param_start + numels[i];
    layout.param_start[i] = param_start;
    bucket.params.push_back(i);
    if (bucket_size != 0 && param_end - bucket.start >= bucket_size) {
      bucket.end = pad_end(param_end);
      param_start = bucket.end;
      layout.buckets.push_back(std::move(bucket));
      bucket = MegatronLayout::Bucket{};
      bucket.start = param_start;
    } else {
      param_start = param_end;
    }
  }
  if (!bucket.params.empty()) {
    bucket.end = pad_end(param_end);
    layout.buckets.push_back(std::move(bucket));
  }
  layout.numel = layout.buckets.empty() ? 0 : layout.buckets.back().end;
  return layout;
}

Status MegatronGradBuffer::Start(const TraceHeader& header) {
  header_ = &header;
  std::vector<DType> dtype;  // by dense index: instances in order, their parameters in order
  for (const UnitInfo& instance : header.units) {
    for (const ParamInfo& param : instance.params) {
      numel_.push_back(param.numel);
      dtype.push_back(param.dtype);
    }
  }
  locators_.assign(numel_.size(), {});
  // params[::-1]: the buffer holds the parameters in reverse model order.
  for (std::uint32_t param = static_cast<std::uint32_t>(numel_.size()); param-- > 0;) {
    members_[dtype[param]].push_back(param);
  }
  return Status::Ok();
}

void MegatronGradBuffer::LayOut(Buffer& buffer, const ProcessGroup& group) {
  const std::vector<std::uint32_t>& members = members_[buffer.dtype];
  std::vector<Numel> numels;
  for (std::uint32_t param : members) numels.push_back(numel_[param]);
  MegatronLayout layout = LayOutMegatronBuffer(numels, group.size(), options_);
  buffer.group = &group;
  buffer.numel = layout.numel;
  const std::size_t index = static_cast<std::size_t>(&buffer - buffers_.data());
  for (std::size_t b = 0; b < layout.buckets.size(); ++b) {
    const MegatronLayout::Bucket& laid = layout.buckets[b];
    buffer.buckets.push_back({laid.start, laid.end, laid.params.size(), 0, {}});
    for (std::size_t i : laid.params) locators_[members[i]] = {index, b, layout.param_start[i]};
  }
  counters_.buckets += layout.buckets.size();
}

Status MegatronGradBuffer::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const Event& e = call.event;
  const ParamInfo& info = header_->units[e.unit].params[e.param];
  const std::uint32_t param = header_->ParamIndex(e.unit, e.param);
  auto [it, created] = buffer_index_.try_emplace(info.dtype, buffers_.size());
  if (created) {
    buffers_.push_back({info.dtype, nullptr, std::nullopt, {}, 0});
    LayOut(buffers_.back(), *call.group);
  }
  Buffer& buffer = buffers_[it->second];
  if (call.group->size() != buffer.group->size()) {
    return InvalidTrace(fmt::format(
        "event {}: megatron lays out one grad buffer per dtype for one data-parallel size, but "
        "this gradient's group has {} ranks and the buffer's {}",
        e.index, call.group->size(), buffer.group->size()));
  }
  if (!buffer.id) {
    buffer.id = host.Allocate(buffer.numel * ElementSize(buffer.dtype), Category::kBucketData,
                              buffer.dtype, buffer.group->id);
  }
  const Locator& at = locators_[param];
  Bucket& bucket = buffer.buckets[at.bucket];
  // param.main_grad.add_(param.grad): the gradient into its range of the buffer.
  host.FillGradient({*buffer.id, e.index, 1, numel_[param], buffer.dtype, at.start, 0});
  bucket.slices.push_back({e.index, at.start - bucket.start, numel_[param]});
  ++bucket.ready;
  ++counters_.bucketed;
  // register_grad_ready: with overlap_grad_reduce a full bucket starts its reduction now.
  if (options_.overlap_grad_reduce && bucket.ready == bucket.params) {
    Launch(buffer, bucket, host);
  }
  return Status::Ok();
}

void MegatronGradBuffer::Launch(Buffer& buffer, Bucket& bucket, PolicyHost& host) {
  if (bucket.ready == 0) return;
  const ProcessGroup& group = *buffer.group;
  const Numel numel = bucket.end - bucket.start;
  const bool scatter = options_.distributed_optimizer;
  host.Collective({scatter ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, group.id,
                   group.size(), buffer.dtype, numel, scatter ? numel / group.size() : numel,
                   static_cast<std::uint32_t>(bucket.ready)},
                  {*buffer.id, *buffer.id, bucket.slices, bucket.start});
  bucket.slices.clear();
  bucket.ready = 0;
  ++counters_.flushes;
}

Status MegatronGradBuffer::EndBackward(PolicyHost& host) {
  // finish_grad_sync: every bucket not yet reduced is reduced now, in bucket order.
  for (Buffer& buffer : buffers_) {
    for (Bucket& bucket : buffer.buckets) Launch(buffer, bucket, host);
  }
  return Status::Ok();
}

}  // namespace bucketsim
