// The conv model of fairscale's FSDP memory test (tests/nn/data_parallel/test_fsdp_memory.py,
// facebookresearch/fairscale, read at commit 2c176daa; reference/fsdp_semantics.md §3) as a
// trace generator:
//   stem   = Conv2d(3, 64, k3) + BatchNorm2d(64) + ReLU(inplace)
//   blocks = 3 x [Conv2d(in, hidden_dim, k5, padding 2) + BatchNorm2d(hidden_dim) +
//                 ReLU(inplace)], AdaptiveAvgPool2d(1), Flatten
//   head   = Linear(hidden_dim, 10)
// on an input batch of 2x3x224x224, wrapped as the test wraps it: auto_wrap_bn puts every
// BatchNorm in its own FSDP instance (mixed_precision=False, flatten_parameters=False,
// reshard_after_forward=False; its bucket_cap_mb=0 is ignored under the root, §2.1/§2.8), then
// FSDP(stem), FSDP(blocks), FSDP(head) and the root FSDP(model), which owns no parameters.
// With `activation_checkpointing` the blocks are wrapped as the test's "ckpt" configurations
// do: FSDP(checkpoint_wrapper(blocks)).
#pragma once

#include <memory>

#include "core/event_sink.h"
#include "gen/gen_options.h"
#include "gen/preset.h"

namespace bucketsim {

struct ConvnetConfig : GenOptions {
  int hidden_dim = 128;  // the test uses 128 (fp32) and 512 (AMP)
  int batch = 2;
  int image_size = 224;
  bool activation_checkpointing = false;

  // The test's job: 2 ranks, fp32 ("fsdp" configuration), SGD with momentum, 4 iterations, and
  // get_process_group_cached() for every instance (fairscale since #678).
  ConvnetConfig() {
    world_size = 2;
    iterations = 4;
    compute_dtype = DType::kFloat32;
    optimizer = OptimizerKind::kSgdMomentum;
    group_layout = GroupLayout::kShared;
  }
};

Status GenerateConvnet(const ConvnetConfig& config, EventSink& sink);

std::unique_ptr<Preset> MakeConvnetPreset();

}  // namespace bucketsim
