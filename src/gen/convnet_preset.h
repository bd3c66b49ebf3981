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
// do: FSDP(checkpoint_wrapper(blocks)). The loss is a mean over the logits. With `autocast`
// forward and loss run under torch.autocast (the test's fsdp_amp_compute_dtype32 with
// --param-dtype fp32); with --groups shared-bn-own the groups are those of the test at
// #633/#650 (one for the main instances, one per BN wrapper).
#pragma once

#include <memory>
#include <optional>

#include "core/event_sink.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/preset.h"

namespace bucketsim {

struct ConvnetConfig : GenOptions {
  int hidden_dim = 128;  // the test uses 128 (fp32) and 512 (AMP)
  int batch = 2;
  int image_size = 224;
  bool activation_checkpointing = false;
  // fairscale's flatten_parameters (default True) for the stem, blocks and head instances: one
  // flat parameter each; false: each conv's and linear's weight and bias on their own (the BN
  // wrappers never flatten).
  bool flatten_parameters = true;
  // The test's fsdp_amp_* configurations run forward and loss under autocast (fp16).
  std::optional<DType> autocast;

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

// The model program of `config`; fails on a configuration that describes no model.
Result<ModelProgram> ConvnetProgram(const ConvnetConfig& config);
Status GenerateConvnet(const ConvnetConfig& config, EventSink& sink);

std::unique_ptr<Preset> MakeConvnetPreset();

}  // namespace bucketsim
