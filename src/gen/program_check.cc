// The checks a program passes before the emitter runs (ValidateProgram, declared with the
// program in model_program.h): ids, references, regions, views and sizes, each error at its JSON
// pointer.
#include "gen/model_program.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/closest_name.h"

#include "gen/param_target.h"

namespace bucketsim {

std::uint64_t SaturatingProduct(std::initializer_list<std::uint64_t> factors) {
  std::uint64_t product = 1;
  for (std::uint64_t factor : factors) {
    if (__builtin_mul_overflow(product, factor, &product)) {
      return std::numeric_limits<std::uint64_t>::max();
    }
  }
  return product;
}
namespace {

// Program dtype names: the trace's floating-point names plus the integer and bool tensors a
// model also saves (indices, dropout masks) and complex ones (a rotary embedding's
// view_as_complex: complex64 is two fp32s, complex32 two fp16s). Complex tensors can carry
// gradients but are never a parameter's or a cast's dtype, so they are not "floating".
struct OtherDType {
  std::string_view name;
  Bytes size;
};
constexpr OtherDType kOtherDTypes[] = {
    {"int64", 8}, {"int32", 4},     {"int16", 2},     {"int8", 1},        {"uint8", 1},
    {"bool", 1},  {"complex32", 4}, {"complex64", 8}, {"complex128", 16},
};

std::string_view WithoutTorchPrefix(std::string_view dtype) {
  constexpr std::string_view kPrefix = "torch.";
  return dtype.substr(0, kPrefix.size()) == kPrefix ? dtype.substr(kPrefix.size()) : dtype;
}

// Every allocation the trace makes is a parameter-sized tensor (at most numel x 4 bytes, the
// fp32 grad copy) or a program tensor; none may exceed what a trace reader accepts.
Status ValidateSizes(const ModelProgram& model) {
  for (std::size_t f = 0; f < model.units.size(); ++f) {
    const FsdpUnit& instance = model.units[f];
    for (std::size_t p = 0; p < instance.params.size(); ++p) {
      const GenParam& param = instance.params[p];
      if (param.numel == 0) {
        // fairscale asserts on zero-size reduce-scatter inputs (reference §9).
        return InvalidArgument(fmt::format("/instances/{}/params/{}/numel: '{}.{}' has no elements",
                                           f, p, instance.name, param.name));
      }
      if (SaturatingProduct({param.numel, kFp32Size}) > kMaxSaneBytes) {
        return InvalidArgument(fmt::format(
            "/instances/{}/params/{}/numel: '{}' would need an allocation of more than 1 PiB: the "
            "model is too large",
            f, p, instance.name));
      }
    }
  }
  return Status::Ok();
}

// Views: named, not empty, their numels summing to the flat parameter's; gradient targets
// unique in their instance.
Status ValidateViews(const ModelProgram& model) {
  for (std::size_t f = 0; f < model.units.size(); ++f) {
    const FsdpUnit& instance = model.units[f];
    for (std::size_t p = 0; p < instance.params.size(); ++p) {
      const GenParam& param = instance.params[p];
      Numel sum = 0;
      for (std::size_t v = 0; v < param.views.size(); ++v) {
        const ParamView& view = param.views[v];
        const std::string at = fmt::format("/instances/{}/params/{}/views/{}", f, p, v);
        if (view.name.empty())
          return InvalidArgument(fmt::format("{}/name: must not be empty", at));
        if (view.numel == 0 || view.numel > param.numel) {
          return InvalidArgument(fmt::format(
              "{}/numel: view '{}' has {} elements (at least 1, at most the parameter's {})", at,
              view.name, view.numel, param.numel));
        }
        sum += view.numel;
      }
      if (!param.views.empty() && sum != param.numel) {
        return InvalidArgument(fmt::format(
            "/instances/{}/params/{}/views: the views of '{}' have {} elements in all, the "
            "parameter {} (a flat parameter is its views concatenated, no padding)",
            f, p, param.name, sum, param.numel));
      }
    }
    std::map<std::string, ParamTarget, std::less<>> seen;
    Status status = Status::Ok();
    ForEachTarget(instance, f, [&](const std::string& name, ParamTarget at) {
      if (!status.ok()) return;
      const auto [it, fresh] = seen.emplace(name, at);
      if (fresh) return;
      status = InvalidArgument(fmt::format(
          "/instances/{}/params/{}{}: '{}' names two parameters of instance '{}'", f, at.param,
          instance.params[at.param].views.empty() ? "/name"
                                                  : fmt::format("/views/{}/name", at.view),
          name, instance.name));
    });
    BUCKETSIM_RETURN_IF_ERROR(status);
  }
  return Status::Ok();
}

// The checks of one tensor object at `pointer`.
Status ValidateTensor(const std::string& pointer, Bytes bytes, std::string_view dtype,
                      std::string_view what) {
  if (bytes > kMaxSaneBytes) {
    return InvalidArgument(fmt::format(
        "{}/bytes: '{}' would need more than 1 PiB: a model dimension (seq, hidden, heads, "
        "micro-batch, vocab, image size) is too large",
        pointer, what));
  }
  if (ProgramDTypeSize(dtype) == 0) {
    return InvalidArgument(fmt::format("{}/dtype: '{}' is not a known dtype", pointer, dtype));
  }
  return Status::Ok();
}

// Tensor ids, instance references, regions and gathers of a program, in forward order.
class ProgramChecker {
 public:
  explicit ProgramChecker(const ModelProgram& model)
      : model_(model), gathered_(model.units.size(), 0), ended_(model.units.size(), 0) {}

  Status Check() {
    BUCKETSIM_RETURN_IF_ERROR(ValidateSizes(model_));
    BUCKETSIM_RETURN_IF_ERROR(ValidateViews(model_));
    for (std::size_t f = 0; f < model_.units.size(); ++f) {
      for (std::size_t g = 0; g < f; ++g) {
        if (model_.units[g].name == model_.units[f].name) {
          return InvalidArgument(fmt::format("/instances/{}/name: '{}' is already instance {}", f,
                                             model_.units[f].name, g));
        }
      }
    }
    for (std::size_t i = 0; i < model_.inputs.size(); ++i) {
      const ProgramTensor& t = model_.inputs[i];
      const std::string pointer = fmt::format("/inputs/{}", i);
      BUCKETSIM_RETURN_IF_ERROR(ValidateTensor(pointer, t.bytes, t.dtype, t.id));
      if (!t.alias.empty() || t.requires_grad.value_or(false)) {
        return InvalidArgument(
            fmt::format("{}: an input is a tensor of its own that does not require grad", pointer));
      }
      BUCKETSIM_RETURN_IF_ERROR(Define(pointer + "/id", t.id, /*is_input=*/true));
    }
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      BUCKETSIM_RETURN_IF_ERROR(CheckOp(i));
    }
    if (region_begin_) {
      return InvalidArgument(
          fmt::format("/forward/{}: checkpoint_begin has no checkpoint_end", *region_begin_));
    }
    for (std::size_t f = 0; f < model_.units.size(); ++f) {
      if (!model_.units[f].params.empty() && gathered_[f] == 0) {
        return InvalidArgument(
            fmt::format("/instances/{}: '{}' has parameters but the forward never gathers it", f,
                        model_.units[f].name));
      }
    }
    const auto loss = tensors_.find(model_.loss);
    if (loss == tensors_.end() || loss->second.is_input) {
      return InvalidArgument(fmt::format("/loss: '{}' is not an output of a run", model_.loss));
    }
    for (std::size_t k = 0; k < model_.held.size(); ++k) {
      if (!tensors_.contains(model_.held[k])) {
        return InvalidArgument(
            fmt::format("/held/{}: tensor '{}' is not defined", k, model_.held[k]));
      }
    }
    BUCKETSIM_RETURN_IF_ERROR(CheckParamReadsEverywhere());
    return CheckModuleCalls();
  }

 private:
  struct Defined {
    bool is_input = false;
    std::optional<std::size_t> region;  // the checkpoint_begin of the region that made it
    std::string storage;                // the tensor whose storage it is (itself unless an alias)
  };

  Status Define(const std::string& pointer, const std::string& id, bool is_input,
                const std::string& alias = "") {
    if (id.empty())
      return InvalidArgument(fmt::format("{}: a tensor id must not be empty", pointer));
    if (tensors_.contains(id)) {
      return InvalidArgument(fmt::format("{}: tensor '{}' is defined twice", pointer, id));
    }
    tensors_[id] = {is_input, is_input ? std::nullopt : region_begin_,
                    alias.empty() ? id : tensors_.at(alias).storage};
    return Status::Ok();
  }

  // A view or an in-place result shares the storage of what its op was given (PyTorch makes
  // no view of a tensor it was not passed): the aliased tensor's storage is one of the run's
  // inputs'. Otherwise the emitter would have nothing keeping that storage alive here.
  Status CheckAliasIsRead(const std::string& pointer, const ForwardOp& op,
                          const std::string& alias) const {
    const std::string& storage = tensors_.at(alias).storage;
    for (const RunInput& input : op.inputs) {
      if (tensors_.at(input.tensor).storage == storage) return Status::Ok();
    }
    return InvalidArgument(fmt::format(
        "{}: '{}' is not read by this run (no input shares its storage): a view or in-place "
        "result shares the storage of one of its run's inputs",
        pointer, alias));
  }

  // A tensor a run reads or saves: defined earlier; inside a checkpointed region, one the
  // region can recompute from (made inside it, a program input, or kept by its begin).
  Status Reference(const std::string& pointer, const std::string& id) {
    const auto it = tensors_.find(id);
    if (it == tensors_.end()) {
      return InvalidArgument(
          fmt::format("{}: tensor '{}' is not defined by an earlier run or input", pointer, id));
    }
    if (region_begin_ && !it->second.is_input && it->second.region != region_begin_ &&
        !region_keeps_.contains(id)) {
      return InvalidArgument(fmt::format(
          "{}: tensor '{}' is made outside the checkpointed region that begins at /forward/{} and "
          "the region's checkpoint_begin does not save it: its backward could not recompute",
          pointer, id, *region_begin_));
    }
    return Status::Ok();
  }

  Status CheckInstance(const std::string& pointer, std::size_t f) const {
    if (f >= model_.units.size()) {
      return InvalidArgument(fmt::format("{}: instance {} is out of range ({} instances)", pointer,
                                         f, model_.units.size()));
    }
    return Status::Ok();
  }

  Status CheckOp(std::size_t i) {
    const ForwardOp& op = model_.forward[i];
    const std::string pointer = fmt::format("/forward/{}", i);
    switch (op.kind) {
      case OpKind::kGather:
        BUCKETSIM_RETURN_IF_ERROR(CheckInstance(pointer + "/instance", op.instance));
        if (gathered_[op.instance]++ != 0) {
          return InvalidArgument(fmt::format("{}: instance '{}' is gathered a second time", pointer,
                                             model_.units[op.instance].name));
        }
        return Status::Ok();
      case OpKind::kEndForward:
        BUCKETSIM_RETURN_IF_ERROR(CheckInstance(pointer + "/instance", op.instance));
        if (gathered_[op.instance] == 0 || ended_[op.instance]++ != 0) {
          return InvalidArgument(
              fmt::format("{}: end_forward of instance '{}' needs exactly one gather before it",
                          pointer, model_.units[op.instance].name));
        }
        return Status::Ok();
      case OpKind::kCheckpointBegin:
        if (region_begin_) {
          return InvalidArgument(
              fmt::format("{}: checkpoint regions do not nest (one begins at /forward/{})", pointer,
                          *region_begin_));
        }
        for (std::size_t k = 0; k < op.saves.size(); ++k) {
          BUCKETSIM_RETURN_IF_ERROR(CheckSave(fmt::format("{}/saves/{}", pointer, k), op.saves[k]));
          if (!op.saves[k].tensor.empty()) region_keeps_.insert(op.saves[k].tensor);
        }
        if (op.reentrant && !op.early_stop) {
          return InvalidArgument(fmt::format(
              "{}/early_stop: a reentrant region reruns its whole forward; early_stop is a "
              "setting of non-reentrant ones (\"reentrant\": false)",
              pointer));
        }
        region_begin_ = i;
        return Status::Ok();
      case OpKind::kCheckpointEnd:
        if (!region_begin_) {
          return InvalidArgument(
              fmt::format("{}: checkpoint_end without checkpoint_begin", pointer));
        }
        region_begin_.reset();
        region_keeps_.clear();
        return Status::Ok();
      case OpKind::kRun:
        return CheckRun(pointer, op);
    }
    return Status::Ok();
  }

  Status CheckSave(const std::string& pointer, const SavedTensor& save) {
    if (!save.tensor.empty()) return Reference(pointer + "/tensor", save.tensor);
    return ValidateTensor(pointer, save.fresh.bytes, save.fresh.dtype, save.fresh.name);
  }

  // A tensor a run releases: made by this run or an earlier one of the same checkpointed
  // region (or, outside regions, outside them), so that a recompute makes and releases it too,
  // or made in a region that has ended (a cache, autocast's, holds it past the region: a
  // recompute holds it until it ends); released by one run only.
  Status CheckRelease(const std::string& pointer, const std::string& id) {
    const auto it = tensors_.find(id);
    if (it == tensors_.end() || it->second.is_input) {
      return InvalidArgument(
          fmt::format("{}: tensor '{}' is not made by this run or an earlier one", pointer, id));
    }
    if (!it->second.region && region_begin_) {
      return InvalidArgument(fmt::format(
          "{}: tensor '{}' is made outside checkpointed regions and released in one (whose "
          "recompute would release it again)",
          pointer, id));
    }
    if (!released_.insert(id).second) {
      return InvalidArgument(fmt::format("{}: tensor '{}' is released twice", pointer, id));
    }
    return Status::Ok();
  }

  Status CheckRun(const std::string& pointer, const ForwardOp& op) {
    if (op.name.empty())
      return InvalidArgument(fmt::format("{}/name: a run needs a name", pointer));
    // Selective checkpointing's policy runs in non-reentrant regions only (torch 2.6
    // checkpoint() refuses context_fn with use_reentrant=True).
    if (op.policy_saved && (!region_begin_ || model_.forward[*region_begin_].reentrant)) {
      return InvalidArgument(fmt::format(
          "{}/policy: \"save\" is selective checkpointing's decision, made only inside a "
          "non-reentrant checkpointed region (\"reentrant\": false)",
          pointer));
    }
    std::vector<double> all = {op.flops, op.BackwardFlops()};
    all.insert(all.end(), op.flops_growth.begin(), op.flops_growth.end());
    if (op.backward_flops_growth) {
      all.insert(all.end(), op.backward_flops_growth->begin(), op.backward_flops_growth->end());
    }
    for (double flops : all) {
      if (!std::isfinite(flops) || flops < 0) {
        return InvalidArgument(fmt::format(
            "{}: flops, backward_flops and their growth with the batch (per sample, per token) "
            "must be finite and not negative",
            pointer));
      }
    }
    for (std::size_t k = 0; k < op.uses.size(); ++k) {
      const std::string at = fmt::format("{}/uses/{}", pointer, k);
      BUCKETSIM_RETURN_IF_ERROR(CheckInstance(at, op.uses[k]));
      if (gathered_[op.uses[k]] == 0 || ended_[op.uses[k]] != 0) {
        return InvalidArgument(fmt::format(
            "{}: instance '{}' is not gathered here (uses must lie between its gather and its "
            "end_forward)",
            at, model_.units[op.uses[k]].name));
      }
    }
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      BUCKETSIM_RETURN_IF_ERROR(
          Reference(fmt::format("{}/inputs/{}", pointer, k), op.inputs[k].tensor));
    }
    for (std::size_t k = 0; k < op.outputs.size(); ++k) {
      const ProgramTensor& t = op.outputs[k];
      const std::string at = fmt::format("{}/outputs/{}", pointer, k);
      BUCKETSIM_RETURN_IF_ERROR(ValidateTensor(at, t.bytes, t.dtype, t.id));
      if (!t.alias.empty()) {
        BUCKETSIM_RETURN_IF_ERROR(Reference(at + "/alias", t.alias));
        BUCKETSIM_RETURN_IF_ERROR(CheckAliasIsRead(at + "/alias", op, t.alias));
      }
      BUCKETSIM_RETURN_IF_ERROR(Define(at + "/id", t.id, /*is_input=*/false, t.alias));
    }
    for (std::size_t k = 0; k < op.saves.size(); ++k) {
      BUCKETSIM_RETURN_IF_ERROR(CheckSave(fmt::format("{}/saves/{}", pointer, k), op.saves[k]));
    }
    for (std::size_t k = 0; k < op.workspace.size(); ++k) {
      const NewTensor& t = op.workspace[k];
      BUCKETSIM_RETURN_IF_ERROR(
          ValidateTensor(fmt::format("{}/workspace/{}", pointer, k), t.bytes, t.dtype, t.name));
    }
    for (std::size_t k = 0; k < op.releases.size(); ++k) {
      BUCKETSIM_RETURN_IF_ERROR(
          CheckRelease(fmt::format("{}/releases/{}", pointer, k), op.releases[k]));
    }
    if (op.param_reads) {
      const std::vector<std::string>& reads = *op.param_reads;
      for (std::size_t k = 0; k < reads.size(); ++k) {
        const std::string at = fmt::format("{}/param_reads/{}", pointer, k);
        Result<ParamTarget> target = ResolveParamRead(model_, op.uses, reads[k]);
        if (!target.ok())
          return InvalidArgument(fmt::format("{}: {}", at, target.status().message()));
        if (std::find(reads.begin(), reads.begin() + k, reads[k]) != reads.begin() + k) {
          return InvalidArgument(fmt::format("{}: '{}' is read twice by the run", at, reads[k]));
        }
      }
    }
    return Status::Ok();
  }

  // param_reads on every run that uses parameters, or on none (the whole-instance gradients
  // of programs before param_reads): a mix would leave a gradient made twice or never.
  Status CheckParamReadsEverywhere() const {
    std::optional<std::size_t> with, without;
    for (std::size_t i = 0; i < model_.forward.size(); ++i) {
      const ForwardOp& op = model_.forward[i];
      if (op.kind != OpKind::kRun) continue;
      if (op.param_reads) {
        if (!with) with = i;
      } else if (!op.uses.empty() && !without) {
        without = i;
      }
    }
    if (!with || !without) return Status::Ok();
    return InvalidArgument(fmt::format(
        "/forward/{}: run '{}' uses parameters but has no param_reads, while /forward/{} has "
        "them: give param_reads on every run that uses parameters, or on none",
        *without, model_.forward[*without].name, *with));
  }

  // Module calls: ranges of the forward, nested (disjoint, or one inside the other), each
  // holding both or neither op of every instance's gather/end_forward pair, so that a region
  // placed on a call (gen/program_checkpoint.h) is one the emitter can run.
  Status CheckModuleCalls() const {
    const std::vector<ModuleCall>& calls = model_.module_calls;
    const std::size_t ops = model_.forward.size();
    for (std::size_t c = 0; c < calls.size(); ++c) {
      if (calls[c].begin > calls[c].end || calls[c].end > ops) {
        return InvalidArgument(fmt::format(
            "/modules/{}/ops: [{}, {}] is not a range of the forward's {} ops (BEGIN <= END <= {})",
            c, calls[c].begin, calls[c].end, ops, ops));
      }
    }
    std::vector<std::size_t> order(calls.size());
    for (std::size_t c = 0; c < order.size(); ++c) order[c] = c;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return calls[a].begin != calls[b].begin ? calls[a].begin < calls[b].begin
                                              : calls[a].end > calls[b].end;
    });
    std::vector<std::size_t> open;  // the calls holding the one at hand, outermost first
    for (std::size_t c : order) {
      while (!open.empty() && calls[open.back()].end <= calls[c].begin) open.pop_back();
      if (!open.empty() && calls[c].end > calls[open.back()].end) {
        const ModuleCall& other = calls[open.back()];
        return InvalidArgument(fmt::format(
            "/modules/{}/ops: the call of '{}' [{}, {}] overlaps the call of '{}' [{}, {}] "
            "(/modules/{}) without lying inside it: calls nest",
            c, calls[c].name, calls[c].begin, calls[c].end, other.name, other.begin, other.end,
            open.back()));
      }
      open.push_back(c);
    }
    std::vector<std::size_t> gather(model_.units.size(), ops), end(model_.units.size(), ops);
    for (std::size_t i = 0; i < ops; ++i) {
      const ForwardOp& op = model_.forward[i];
      if (op.kind == OpKind::kGather) gather[op.instance] = i;
      if (op.kind == OpKind::kEndForward) end[op.instance] = i;
    }
    for (std::size_t c = 0; c < calls.size(); ++c) {
      const auto holds = [&](std::size_t i) { return calls[c].begin <= i && i < calls[c].end; };
      for (std::size_t f = 0; f < model_.units.size(); ++f) {
        if (gather[f] == ops || holds(gather[f]) == holds(end[f])) continue;
        return InvalidArgument(fmt::format(
            "/modules/{}/ops: the call of '{}' [{}, {}] holds one of instance '{}''s gather "
            "(/forward/{}) and end_forward (/forward/{}) but not the other",
            c, calls[c].name, calls[c].begin, calls[c].end, model_.units[f].name, gather[f],
            end[f]));
      }
    }
    return Status::Ok();
  }

  const ModelProgram& model_;
  std::vector<int> gathered_;
  std::vector<int> ended_;
  std::map<std::string, Defined, std::less<>> tensors_;
  std::optional<std::size_t> region_begin_;
  std::set<std::string, std::less<>> region_keeps_;
  std::set<std::string, std::less<>> released_;
};

}  // namespace

Bytes ProgramDTypeSize(std::string_view dtype) {
  if (std::optional<DType> floating = ParseDType(dtype)) return ElementSize(*floating);
  for (const OtherDType& integer : kOtherDTypes) {
    if (integer.name == WithoutTorchPrefix(dtype)) return integer.size;
  }
  return 0;
}

bool IsFloatingDType(std::string_view dtype) { return ParseDType(dtype).has_value(); }

Status ValidateProgram(const ModelProgram& model) { return ProgramChecker(model).Check(); }

std::vector<std::string> CallClasses(const ModelProgram& model) {
  std::vector<std::string> classes;
  for (const ModuleCall& call : model.module_calls) {
    if (std::find(classes.begin(), classes.end(), call.type) == classes.end()) {
      classes.push_back(call.type);
    }
  }
  return classes;
}

Status CheckCallClasses(const ModelProgram& model, const std::vector<std::string>& classes,
                        std::string_view what) {
  if (model.module_calls.empty()) {
    return InvalidArgument(fmt::format(
        "the program has no module calls (its \"modules\" key, which tools/record_program.py "
        "writes): record the model again to {} here",
        what));
  }
  const std::vector<std::string> known = CallClasses(model);
  for (const std::string& type : classes) {
    if (std::find(known.begin(), known.end(), type) == known.end()) {
      return InvalidArgument(
          fmt::format("no module of class '{}' runs in the program's forward{} (its classes: {})",
                      type, DidYouMean(type, known), fmt::join(known, ", ")));
    }
  }
  return Status::Ok();
}

}  // namespace bucketsim
