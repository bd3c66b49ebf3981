// Megatron-Core DDP's contiguous gradient buffer (megatron/core/distributed/
// param_and_grad_buffer.py, distributed_data_parallel.py; reference/anchors.md §1.4).
//
// One persistent, full-size (unsharded) buffer per gradient dtype holds every parameter's
// main_grad, the parameters laid out in reverse model order (params[::-1]: the order backward
// produces them). With the distributed optimizer each parameter starts at a multiple of 64
// elements and each bucket ends at a multiple of lcm(dp, 128) (lcm(dp, 128, 2^16) with
// pad_buckets_for_high_nccl_busbw) so that it splits into dp equal ranges; without it there is
// no padding. A bucket closes once it holds bucket_size elements or more (default
// max(40M, 1M * dp)); without overlap_grad_reduce bucket_size is None: one bucket per buffer.
// Each bucket is reduced in place (reduce-scatter with the distributed optimizer, all-reduce
// without): at the end of backward (finish_grad_sync), or, with overlap_grad_reduce, as soon
// as its last gradient is ready. After the reduce-scatter the rest of the buffer is garbage;
// it is zeroed for the next step (zero_grad_buffer), never freed.
//
// Per gradient (the trace's rs request) its values are added into its range (main_grad.add_),
// in the parameter's numel and dtype (the trace header's); dp is the size of the request's
// process group. Not modelled: Megatron allocates the buffer when the model is wrapped, before
// the trace's first event; here it is allocated at the first gradient, when dp is known.
// grad_reduce_in_fp32 (an fp32 buffer for bf16 parameters) is not a key: the buffer's dtype
// is the parameter's.
#pragma once

#include <map>
#include <optional>
#include <vector>

#include "policy/bucket_policy.h"

namespace bucketsim {

struct MegatronLayoutOptions {
  std::optional<Numel> bucket_size;  // unset: max(40M, 1M * dp), None without overlap
  bool distributed_optimizer = true;
  bool overlap_grad_reduce = false;
  bool pad_for_high_nccl_busbw = false;
};

// The layout of one grad buffer: each parameter's start, and the buckets' [start, end).
struct MegatronLayout {
  struct Bucket {
    Numel start = 0;
    Numel end = 0;
    std::vector<std::size_t> params;  // indices into the `numels` given, in buffer order
  };
  std::vector<Numel> param_start;  // by the index into `numels`
  std::vector<Bucket> buckets;
  Numel numel = 0;
};
// `numels` in buffer order (reverse model order).
MegatronLayout LayOutMegatronBuffer(const std::vector<Numel>& numels, int dp,
                                    const MegatronLayoutOptions& options);

class MegatronGradBuffer final : public BucketPolicy {
 public:
  explicit MegatronGradBuffer(MegatronLayoutOptions options) : options_(options) {}

  Status Start(const TraceHeader& header) override;
  Status ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) override;
  Status EndBackward(PolicyHost& host) override;
  PolicyCounters counters() const override { return counters_; }

 private:
  struct Bucket {
    Numel start = 0;
    Numel end = 0;
    std::size_t params = 0;
    std::size_t ready = 0;
    std::vector<ReducedSlice> slices;
  };
  struct Buffer {
    DType dtype = DType::kFloat32;
    const ProcessGroup* group = nullptr;
    std::optional<BufferId> id;
    std::vector<Bucket> buckets;
    Numel numel = 0;
  };
  struct Locator {
    std::size_t buffer = 0;
    std::size_t bucket = 0;
    Numel start = 0;
  };

  void LayOut(Buffer& buffer, const ProcessGroup& group);
  void Launch(Buffer& buffer, Bucket& bucket, PolicyHost& host);

  MegatronLayoutOptions options_;
  const TraceHeader* header_ = nullptr;
  std::vector<Buffer> buffers_;  // by dtype, first seen
  std::map<DType, std::size_t> buffer_index_;
  std::map<DType, std::vector<std::uint32_t>> members_;  // dense params, buffer order
  std::vector<Locator> locators_;                        // by dense parameter index
  std::vector<Numel> numel_;                             // by dense parameter index
  PolicyCounters counters_;
};

}  // namespace bucketsim
