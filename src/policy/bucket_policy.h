// A bucket policy turns the trace's reduce-scatter requests and end-of-backward flushes into
// buffer allocations, frees and collectives. It knows nothing of JSON, CUDA or MPI: everything
// it does goes through a PolicyHost (the replay engine), which owns the memory accounting and
// what happens to a reduced shard once it is handed over (the gradient retention rule, the same
// for every policy). fairscale's bucketer, PyTorch FSDP1's direct reduce-scatter, DDP's reducer,
// DeepSpeed ZeRO's IPG buckets, Megatron's grad buffer and FSDP2's per-group reduce-scatter all
// implement this interface; the engine never tests which policy it runs.
#pragma once

#include <cstdint>

#include "core/buffer_ops.h"
#include "core/collective_record.h"
#include "core/event.h"
#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

using BufferId = std::uint32_t;

// One reduce-scatter request of the trace, resolved against the header.
struct ReduceScatterCall {
  Event event;  // kind kReduceScatter: fsdp, param, dtype, numel, shard_mode, cast_dtype
  const ProcessGroup* group = nullptr;
};

class PolicyHost {
 public:
  virtual ~PolicyHost() = default;
  // A new buffer on the post-backward stream, with one reference held by the policy.
  virtual BufferId Allocate(Bytes bytes, Category category, DType dtype, GroupId group) = 0;
  // A buffer that holds a collective's input where the backend holds data, but whose memory is
  // the trace's already: PyTorch's FSDP1 reduce-scatters the unsharded gradient itself, an
  // allocation of the trace. Never charged to the memory model; one reference, released as any.
  virtual BufferId Stage(Bytes bytes, DType dtype, GroupId group) = 0;
  // Drops one reference; the memory is freed when no reference (policy or gradient) is left.
  virtual void Release(BufferId buffer) = 0;
  virtual void Relabel(BufferId buffer, Category category) = 0;
  // Data movement on the policy's stream, in the order fairscale performs it. `fill.buffer`
  // and the handles in `copy` and `buffers` are BufferIds of this host.
  virtual void FillGradient(const GradientFill& fill) = 0;
  virtual void Copy(const BufferCopy& copy) = 0;
  virtual void Collective(const CollectiveRecord& record, const CollectiveBuffers& buffers) = 0;
  // The post-reduction callback: `reduced` holds the request's reduced shard.
  virtual void Deliver(const ReduceScatterCall& call, BufferId reduced) = 0;
};

struct PolicyCounters {
  std::uint64_t buckets = 0;   // distinct bucket keys created
  std::uint64_t flushes = 0;   // non-empty bucket flushes
  std::uint64_t bypasses = 0;  // requests reduced on their own
  std::uint64_t bucketed = 0;  // requests that went through a bucket
};

class BucketPolicy {
 public:
  virtual ~BucketPolicy() = default;
  // Before the first event: the model's instances and parameters (DDP and Megatron lay out their
  // buffers over the whole model, in parameter order). The header outlives the policy's use.
  virtual Status Start(const TraceHeader& /*header*/) { return Status::Ok(); }
  // A phase marker of the trace (forward, backward, ...), before the phase's first event: where
  // DDP rebuilds its buckets (the second forward) and ZeRO-1/2 allocates its IPG buffers
  // (backward()).
  virtual Status BeginPhase(Phase /*phase*/, PolicyHost& /*host*/) { return Status::Ok(); }
  virtual Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) = 0;
  // The root's end-of-backward callback: flush every bucket, then end the backward lifetime.
  virtual Status EndBackward(PolicyHost& host) = 0;
  virtual PolicyCounters counters() const = 0;
};

}  // namespace bucketsim
