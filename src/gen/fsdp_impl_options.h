// What each FSDP implementation owns of `gen`: its own flags (bound to its part of GenOptions),
// its defaults of the options every implementation shares, which shared options it takes, its
// rules, the PyTorch setting text a trace's header quotes, the casts its hooks make at the
// units' boundaries, its unit settings and its emitter. One entry per implementation, each
// defined in that implementation's own options file (fairscale_fsdp_options.cc,
// torch_fsdp1_options.cc, torch_fsdp2_options.cc) and listed once in fsdp_impl_options.cc; the
// shared code (gen_options.cc, fsdp_emitter.cc, unit_settings.cc) asks the entry and never
// switches on the implementation. A new implementation is its value in core/fsdp_impl.h, its
// options file and emitter, and a line in the table.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/fsdp_impl.h"
#include "core/status.h"
#include "gen/fsdp_implementation.h"
#include "gen/gen_options.h"
#include "gen/preset_param.h"
#include "gen/program_boundary_casts.h"

namespace bucketsim {

struct FsdpImplOptions {
  FsdpImpl impl = FsdpImpl::kFairscale;
  // Its defaults of the shared options, where a user gave none (either flag order).
  DType compute_dtype = DType::kFloat32;
  GroupLayout group_layout = GroupLayout::kShared;
  OptimizerImpl optimizer_impl = OptimizerImpl::kForeach;
  // The shared options it takes: --offload-params, and --reshard-after-forward N (reshard to N
  // ranks rather than free).
  bool offloads = false;
  bool reshards_to_ranks = false;
  // Its own flags, bound to `options` (its part of it). Set away from their default under
  // another implementation they are an error (ValidateGenOptions), which names this one, or
  // what that implementation says instead where `said_elsewhere` has the flag.
  std::vector<PresetParam> (*params)(GenOptions& options) = nullptr;
  std::vector<std::pair<std::string_view, std::string_view>> said_elsewhere;  // flag, instead
  // Its rules beyond each flag's own parse, run on its own runs only; empty: none.
  Status (*validate)(const GenOptions& options) = nullptr;
  // "FullyShardedDataParallel(module, ...)": the setting that makes PyTorch run so, which the
  // header carries (fsdp_setting) and advice quotes; null: the header names no implementation
  // (fairscale's traces, as they always were).
  std::string (*setting)(const GenOptions& options) = nullptr;
  // One line of the run for a preset's description.
  std::string (*describe)(const GenOptions& options) = nullptr;
  // The casts its hooks make at the units' boundaries (gen/program_boundary_casts.h); null:
  // none.
  BoundaryCasts (*boundary_casts)(const GenOptions& options) = nullptr;
  // The unit setting keys it takes (gen/unit_settings.h), as a recorded program's "fsdp" key
  // and --unit-setting spell them.
  std::vector<std::string_view> unit_keys;
  // A program instance's keys (traces/README.md "Instance object") it applies: an instance's
  // own reshard_after_forward false (null: applied; else what it takes instead, for the first
  // such unit `unit`, in a sentence), and an instance's own_group under --groups shared-bn-own.
  std::string (*instance_reshard_instead)(std::string_view unit) = nullptr;
  bool own_groups = false;
  std::unique_ptr<FsdpImplementation> (*make)(const ModelProgram& model, const GenOptions& options,
                                              TraceEmitter& trace) = nullptr;
};

// Every implementation's entry, in core/fsdp_impl.h's order.
std::span<const FsdpImplOptions> FsdpImplOptionsTable();
const FsdpImplOptions& OptionsOf(FsdpImpl impl);

// The entries, each in its implementation's options file.
FsdpImplOptions FairscaleFsdpOptions();
FsdpImplOptions TorchFsdp1Options();
FsdpImplOptions TorchFsdp2Options();

}  // namespace bucketsim
