// A model under fairscale FSDP as the trace generator sees it: its FSDP instances (each with
// its parameters, flat or not) and the forward pass as a program of ops over them. The emitter
// derives everything else from reference/fsdp_semantics.md §2: the fp32 shards at init, the
// all-gathers (with the mixed-precision cast shard), the reshards, the backward as the forward
// program run in reverse (pre-backward re-gathers, backward spans, full gradients at the first
// op that uses an instance's parameters in backward, post-backward hooks that free the
// gathered parameters and request one reduce-scatter per parameter), the final flush, the
// optimizer state at the first step and zero_grad(set_to_none=True). Presets only describe
// their model; the emitter is the one place the FSDP allocation pattern lives.
#pragma once

#include <string>
#include <vector>

#include "core/event_sink.h"
#include "core/units.h"
#include "gen/gen_options.h"

namespace bucketsim {

struct GenParam {
  std::string name;  // "flat_param_0", "weight", ...
  Numel numel = 0;   // unsharded
};

struct GenInstance {
  std::string name;
  std::vector<GenParam> params;  // one flat parameter, or the module's own (flatten=False)
  // False for instances wrapped with mixed_precision=False (auto_wrap_bn): gathered, computed
  // and reduced in fp32 whatever the options say.
  bool mixed_precision = true;
  // False where the wrapper forces reshard_after_forward=False (auto_wrap_bn) or for the
  // outermost instance (disable_reshard_on_root); otherwise the option decides.
  bool reshard_after_forward = true;
};

enum class OpKind {
  kGather,           // the instance's forward begins: all-gather its parameters
  kRun,              // a module runs: compute span, activations saved for backward
  kCheckpointBegin,  // an activation-checkpointed region begins; keeps `activations` (its input)
  kCheckpointEnd,    // ... and ends: the region's runs are recomputed at the start of its backward
  kEndForward,       // the instance's forward ends: reshard if it does
};

struct ForwardOp {
  OpKind kind = OpKind::kRun;
  std::size_t instance = 0;        // kGather, kEndForward
  std::string name;                // kRun: "block0" gives spans "forward block0", ...
  double flops = 0;                // kRun: forward FLOPs (backward is charged twice that)
  std::vector<Bytes> activations;  // kRun: saved, in order; kCheckpointBegin: the kept input
  std::vector<std::size_t> uses;   // kRun: instances whose parameters it computes with
};

struct FsdpModel {
  std::string description;
  std::vector<GenInstance> instances;
  std::vector<ForwardOp> forward;
  // Allocated once at init and alive all run (the input batch); category activation.
  std::vector<Bytes> inputs;
};

// Emits the header and every event of `options.iterations` iterations into `sink`.
Status EmitFsdpTrace(const FsdpModel& model, const GenOptions& options, EventSink& sink);

// A product that saturates instead of wrapping, so an absurd configuration shows up as a size
// beyond kMaxSaneBytes (and is rejected) rather than as a small wrapped-around number.
std::uint64_t SaturatingProduct(std::initializer_list<std::uint64_t> factors);

}  // namespace bucketsim
