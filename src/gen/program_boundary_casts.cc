#include "gen/program_boundary_casts.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/program_regions.h"

namespace bucketsim {
namespace {

constexpr std::size_t kModelInput = static_cast<std::size_t>(-1);

struct Made {
  const ProgramTensor* tensor = nullptr;
  std::size_t op = kModelInput;  // the run that made it; kModelInput for a model input
};

std::unordered_map<std::string, Made> TensorsOf(const ModelProgram& model) {
  std::unordered_map<std::string, Made> made;
  for (const ProgramTensor& input : model.inputs) made[input.id] = {&input, kModelInput};
  for (std::size_t i = 0; i < model.forward.size(); ++i) {
    for (const ProgramTensor& output : model.forward[i].outputs) made[output.id] = {&output, i};
  }
  return made;
}

// Every reference op i makes to a tensor made earlier: its inputs, saves by reference,
// releases and its outputs' aliases.
template <typename Fn>
void ForEachReference(ForwardOp& op, Fn&& fn) {
  for (RunInput& input : op.inputs) fn(input.tensor);
  for (SavedTensor& save : op.saves) {
    if (!save.tensor.empty()) fn(save.tensor);
  }
  for (std::string& released : op.releases) fn(released);
  for (ProgramTensor& output : op.outputs) {
    if (!output.alias.empty()) fn(output.alias);
  }
}

// The cast of `source` to `to`: x.to(dtype), its storage the same count of elements.
class CastMaker {
 public:
  CastMaker(const ModelProgram& model, BoundaryCastSummary& summary) : summary_(summary) {
    for (const auto& [id, made] : TensorsOf(model)) ids_.insert(id);
  }

  ForwardOp Cast(const ProgramTensor& source, DType to, const std::string& run_name,
                 bool post_forward) {
    const Bytes from_size = ProgramDTypeSize(source.dtype);
    const Bytes to_size = ElementSize(to);
    ProgramTensor copy;
    copy.id = FreshId(fmt::format("{}.to_{}", source.id, DTypeName(to)));
    copy.bytes = source.bytes / from_size * to_size;
    copy.dtype = std::string(DTypeName(to));
    copy.shape = source.shape;
    copy.name = source.name;
    for (std::size_t k = 0; k < copy.bytes_growth.size(); ++k) {
      copy.bytes_growth[k] = source.bytes_growth[k] * static_cast<std::int64_t>(to_size) /
                             static_cast<std::int64_t>(from_size);
    }
    ++summary_.casts;
    summary_.bytes += copy.bytes;
    ForwardOp op;
    op.kind = OpKind::kRun;
    op.name = run_name;
    op.inputs.push_back({source.id, InputGrad::kNew});
    op.outputs.push_back(std::move(copy));
    op.in_post_forward_hook = post_forward;
    return op;
  }

 private:
  std::string FreshId(const std::string& wanted) {
    std::string id = wanted;
    for (int n = 2; ids_.contains(id); ++n) id = fmt::format("{}#{}", wanted, n);
    ids_.insert(id);
    return id;
  }

  std::unordered_set<std::string> ids_;
  BoundaryCastSummary& summary_;
};

// `count` runs inserted at forward[at], inside the module call of the unit whose hook makes
// them (FSDP's forward hooks run inside module.__call__): a call that begins after them (or at
// `at`, when the runs go after the unit's end_forward) moves, one that holds them grows.
void ShiftModuleCalls(ModelProgram& model, std::size_t at, std::size_t count, bool after_unit) {
  for (ModuleCall& call : model.module_calls) {
    if (call.begin > at || (after_unit && call.begin == at)) {
      call.begin += count;
      call.end += count;
    } else if (call.end > at || (after_unit && call.end == at)) {
      call.end += count;
    }
  }
}

// The tensor needs a cast to `to`: floating point, whole elements, another dtype.
bool NeedsCast(const ProgramTensor& tensor, DType to) {
  if (!IsFloatingDType(tensor.dtype)) return false;
  const std::optional<DType> dtype = ParseDType(tensor.dtype);
  const Bytes size = ProgramDTypeSize(tensor.dtype);
  return dtype && *dtype != to && size != 0 && tensor.bytes % size == 0;
}

Status RefuseInRegion(const ModelProgram& model, std::size_t instance, std::string_view which) {
  return InvalidArgument(fmt::format(
      "unit '{}' is inside a checkpointed region and its {} would need a cast: FSDP's hooks "
      "skip their casts when the region is recomputed (the module then runs on the uncast "
      "tensors), which is not modelled; record the model with its inputs/outputs already in "
      "that dtype, or without checkpointing that unit",
      model.units[instance].name, which));
}

// A checkpointed region inside the unit that reads a model input now reads its copy, an
// activation, which its checkpoint_begin must keep (the checkpoint holds its inputs) as it need
// not keep a model input (the loop holds those). An activation it read was kept already, and
// is renamed in the begin's saves with the rest.
void KeepCopiesInRegions(ModelProgram& model, std::size_t g, std::size_t e,
                         const std::unordered_map<std::string, Made>& made,
                         const std::unordered_map<std::string, std::string>& renamed) {
  std::unordered_set<std::string> model_input_copies;
  for (const auto& [source, copy] : renamed) {
    if (made.at(source).op == kModelInput) model_input_copies.insert(copy);
  }
  if (model_input_copies.empty()) return;
  std::size_t begin = kModelInput;  // the open region's checkpoint_begin, if any
  for (std::size_t i = g + 1; i < e; ++i) {
    ForwardOp& op = model.forward[i];
    if (op.kind == OpKind::kCheckpointBegin) begin = i;
    if (op.kind == OpKind::kCheckpointEnd) begin = kModelInput;
    if (op.kind != OpKind::kRun || begin == kModelInput) continue;
    std::vector<SavedTensor>& kept = model.forward[begin].saves;
    const auto keep = [&](const std::string& tensor) {
      if (model_input_copies.contains(tensor) &&
          std::none_of(kept.begin(), kept.end(),
                       [&](const SavedTensor& save) { return save.tensor == tensor; })) {
        kept.push_back({tensor, {}});
      }
    };
    for (const RunInput& input : op.inputs) keep(input.tensor);
    for (const SavedTensor& save : op.saves) keep(save.tensor);
  }
}

// The casts of one unit, gathered at forward[g] and ended at forward[e].
Status CastUnit(ModelProgram& model, std::size_t g, std::size_t e, std::size_t root,
                const BoundaryCasts& casts, CastMaker& maker) {
  const std::size_t instance = model.forward[g].instance;
  const std::string& unit = model.units[instance].name;
  const bool in_region = FindCheckpointRegions(model).region[g] != CheckpointRegions::kNone;
  if (casts.inputs && (!casts.inputs_root_only || instance == root)) {
    const std::unordered_map<std::string, Made> made = TensorsOf(model);
    std::vector<const ProgramTensor*> inputs;
    std::unordered_set<std::string> seen;
    for (std::size_t i = g + 1; i < e; ++i) {
      for (const RunInput& input : model.forward[i].inputs) {
        const Made& source = made.at(input.tensor);
        if ((source.op == kModelInput || source.op < g) &&
            NeedsCast(*source.tensor, *casts.inputs) && seen.insert(input.tensor).second) {
          inputs.push_back(source.tensor);
        }
      }
    }
    if (!inputs.empty() && in_region) return RefuseInRegion(model, instance, "forward inputs");
    std::unordered_map<std::string, std::string> renamed;
    std::vector<ForwardOp> runs;
    for (const ProgramTensor* input : inputs) {
      runs.push_back(maker.Cast(*input, *casts.inputs, unit + ":cast_forward_inputs", false));
      renamed[input->id] = runs.back().outputs.front().id;
    }
    for (std::size_t i = g + 1; i < e; ++i) {
      ForEachReference(model.forward[i], [&](std::string& id) {
        if (auto it = renamed.find(id); it != renamed.end()) id = it->second;
      });
    }
    KeepCopiesInRegions(model, g, e, made, renamed);
    model.forward.insert(model.forward.begin() + static_cast<std::ptrdiff_t>(g),
                         std::make_move_iterator(runs.begin()),
                         std::make_move_iterator(runs.end()));
    ShiftModuleCalls(model, g, runs.size(), /*after_unit=*/false);
    g += runs.size();
    e += runs.size();
  }
  if (casts.root_outputs && instance == root) {
    std::unordered_set<std::string> referenced(model.held.begin(), model.held.end());
    referenced.insert(model.loss);
    for (std::size_t i = e + 1; i < model.forward.size(); ++i) {
      ForEachReference(model.forward[i], [&](std::string& id) { referenced.insert(id); });
    }
    std::vector<ForwardOp> runs;
    std::unordered_map<std::string, std::string> renamed;
    for (std::size_t i = g + 1; i < e; ++i) {
      for (const ProgramTensor& output : model.forward[i].outputs) {
        if (!referenced.contains(output.id) || !NeedsCast(output, *casts.root_outputs)) continue;
        runs.push_back(
            maker.Cast(output, *casts.root_outputs, unit + ":cast_forward_outputs", true));
        renamed[output.id] = runs.back().outputs.front().id;
      }
    }
    if (!runs.empty() && in_region) return RefuseInRegion(model, instance, "forward outputs");
    const auto rename = [&](std::string& id) {
      if (auto it = renamed.find(id); it != renamed.end()) id = it->second;
    };
    for (std::size_t i = e + 1; i < model.forward.size(); ++i) {
      ForEachReference(model.forward[i], rename);
    }
    rename(model.loss);
    for (std::string& held : model.held) rename(held);
    model.forward.insert(model.forward.begin() + static_cast<std::ptrdiff_t>(e + 1),
                         std::make_move_iterator(runs.begin()),
                         std::make_move_iterator(runs.end()));
    ShiftModuleCalls(model, e + 1, runs.size(), /*after_unit=*/true);
  }
  return Status::Ok();
}

}  // namespace

Result<BoundaryCastSummary> InsertBoundaryCasts(ModelProgram& model, const BoundaryCasts& casts) {
  BoundaryCastSummary summary;
  if (!casts.inputs && !casts.root_outputs) return summary;
  // The root is the program's instance 0 (tools/recorder, the presets); without parameters of
  // its own it is never gathered, and where its forward ends is not in the program.
  constexpr std::size_t root = 0;
  const bool root_gathered = std::any_of(
      model.forward.begin(), model.forward.end(),
      [](const ForwardOp& op) { return op.kind == OpKind::kGather && op.instance == root; });
  if (casts.root_outputs && !root_gathered) {
    return InvalidArgument(fmt::format(
        "the root '{}' has no parameters of its own, so the program does not say where its "
        "forward ends, after which output_dtype casts its outputs",
        model.units.empty() ? std::string("?") : model.units[root].name));
  }
  CastMaker maker(model, summary);
  // One unit at a time, in the order the forward gathers them: a unit's output cast comes
  // before the next unit's input cast, which then reads (and casts back) the copy.
  for (std::size_t g = 0; g < model.forward.size(); ++g) {
    if (model.forward[g].kind != OpKind::kGather) continue;
    const std::size_t instance = model.forward[g].instance;
    std::size_t e = g + 1;
    while (e < model.forward.size() && !(model.forward[e].kind == OpKind::kEndForward &&
                                         model.forward[e].instance == instance)) {
      ++e;
    }
    // A unit without an end_forward (ValidateProgram allows it: its forward runs to the
    // program's end) takes its input casts over the rest of the forward; where its outputs end
    // is not in the program, so output_dtype cannot be said of it.
    if (e == model.forward.size() && casts.root_outputs && instance == root) {
      return InvalidArgument(fmt::format(
          "the root '{}' has no end_forward, so the program does not say where its forward "
          "ends, after which output_dtype casts its outputs",
          model.units[root].name));
    }
    BUCKETSIM_RETURN_IF_ERROR(CastUnit(model, g, e, root, casts, maker));
    // Step over the input casts inserted before this gather.
    while (model.forward[g].kind != OpKind::kGather || model.forward[g].instance != instance) ++g;
  }
  // A rewrite the checks would refuse is this function's fault, not the program's.
  if (Status valid = ValidateProgram(model); !valid.ok()) {
    return InvalidArgument(
        "internal error, please report it: the program with FSDP2's boundary casts fails its "
        "checks: " +
        valid.message());
  }
  return summary;
}

}  // namespace bucketsim
