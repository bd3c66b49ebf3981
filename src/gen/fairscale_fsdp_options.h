// fairscale's own options (fairscale.nn.FullyShardedDataParallel, 2021). GenOptions::fairscale
// holds them; their flags and rules are this implementation's entry of the table
// (gen/fsdp_impl_options.h), in fairscale_fsdp_options.cc.
#pragma once

namespace bucketsim {

struct FairscaleOptions {
  // fp32_reduce_scatter: with mixed precision the post-backward hook copies the gradient to
  // fp32 and reduces that. The same as reduce_dtype fp32.
  bool fp32_reduce_scatter = false;

  friend bool operator==(const FairscaleOptions&, const FairscaleOptions&) = default;
};

}  // namespace bucketsim
