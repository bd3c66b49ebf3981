#include "gen/program_checkpoint.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/comma_list.h"

namespace bucketsim {
namespace {

// Takes the checkpoint_begin and checkpoint_end ops out; the module calls' ranges follow their
// ops. Returns how many regions there were.
std::size_t RemoveRegions(FsdpModel& model) {
  std::vector<std::size_t> index(model.forward.size() + 1);
  std::vector<ForwardOp> kept;
  kept.reserve(model.forward.size());
  std::size_t removed = 0;
  for (std::size_t i = 0; i < model.forward.size(); ++i) {
    index[i] = kept.size();
    ForwardOp& op = model.forward[i];
    if (op.kind == OpKind::kCheckpointBegin) ++removed;
    if (op.kind != OpKind::kCheckpointBegin && op.kind != OpKind::kCheckpointEnd) {
      kept.push_back(std::move(op));
    }
  }
  index[model.forward.size()] = kept.size();
  model.forward = std::move(kept);
  for (ModuleCall& call : model.module_calls) {
    call.begin = index[call.begin];
    call.end = index[call.end];
  }
  return removed;
}

// The classes --checkpoint names: for `all`, those of the instances but the root that are
// module calls.
Result<std::vector<std::string>> ChosenClasses(const FsdpModel& model,
                                               const CheckpointChoice& choice) {
  if (choice.kind == CheckpointChoice::Kind::kClasses) {
    BUCKETSIM_RETURN_IF_ERROR(CheckCallClasses(model, choice.classes, "checkpoint its modules"));
    return choice.classes;
  }
  BUCKETSIM_RETURN_IF_ERROR(CheckCallClasses(model, {}, "checkpoint its modules"));
  std::vector<std::string> classes;
  for (std::size_t f = 1; f < model.instances.size(); ++f) {
    for (const ModuleCall& call : model.module_calls) {
      if (call.name == model.instances[f].name &&
          std::find(classes.begin(), classes.end(), call.type) == classes.end()) {
        classes.push_back(call.type);
      }
    }
  }
  if (classes.empty()) {
    return InvalidArgument(fmt::format(
        "'all' checkpoints the modules FSDP wraps, and no instance but the root is a module of "
        "the program's forward: name the classes to checkpoint (its classes: {})",
        fmt::join(CallClasses(model), ", ")));
  }
  return classes;
}

bool HoldsRun(const FsdpModel& model, const ModuleCall& call) {
  for (std::size_t i = call.begin; i < call.end; ++i) {
    if (model.forward[i].kind == OpKind::kRun) return true;
  }
  return false;
}

// The calls of `classes` that get a region, in forward order: the outermost ones (calls nest,
// regions do not) that run something.
std::vector<ModuleCall> ChosenCalls(const FsdpModel& model,
                                    const std::vector<std::string>& classes) {
  std::vector<ModuleCall> calls = model.module_calls;
  std::sort(calls.begin(), calls.end(), [](const ModuleCall& a, const ModuleCall& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  std::vector<ModuleCall> chosen;
  std::size_t covered_until = 0;
  for (const ModuleCall& call : calls) {
    if (call.begin < covered_until ||
        std::find(classes.begin(), classes.end(), call.type) == classes.end() ||
        !HoldsRun(model, call)) {
      continue;
    }
    chosen.push_back(call);
    covered_until = call.end;
  }
  return chosen;
}

// The checkpoint_begin of a region on ops [begin, end): it keeps each tensor made before the
// region that a run inside needs, in the order the runs first need them (program inputs too, as
// the recorder writes a region's arguments: alive all run anyway).
ForwardOp RegionBegin(const FsdpModel& model, std::size_t begin, std::size_t end) {
  ForwardOp op;
  op.kind = OpKind::kCheckpointBegin;
  std::set<std::string, std::less<>> made, kept;
  for (std::size_t i = begin; i < end; ++i) {
    const ForwardOp& run = model.forward[i];
    if (run.kind != OpKind::kRun) continue;
    const auto keep = [&](const std::string& id) {
      if (made.contains(id) || !kept.insert(id).second) return;
      SavedTensor save;
      save.tensor = id;
      op.saves.push_back(std::move(save));
    };
    // What it reads, and the storage its views and in-place results share; then, its outputs
    // made, what it saves by reference (its own outputs among them).
    for (const RunInput& input : run.inputs) keep(input.tensor);
    for (const ProgramTensor& output : run.outputs) {
      if (!output.alias.empty()) keep(output.alias);
      made.insert(output.id);
    }
    for (const SavedTensor& save : run.saves) {
      if (!save.tensor.empty()) keep(save.tensor);
    }
  }
  return op;
}

// Drops each `releases` entry whose tensor was made in another region than the run (or in one,
// the run in none, or the other way round): the program format allows a release only inside
// the region its tensor was made in, where a recompute repeats it.
void DropReleasesAcrossRegions(FsdpModel& model) {
  std::map<std::string, std::optional<std::size_t>, std::less<>> made_in;
  std::optional<std::size_t> region;
  std::size_t regions = 0;
  for (ForwardOp& op : model.forward) {
    if (op.kind == OpKind::kCheckpointBegin) region = regions++;
    if (op.kind == OpKind::kCheckpointEnd) region.reset();
    if (op.kind != OpKind::kRun) continue;
    for (const ProgramTensor& output : op.outputs) made_in[output.id] = region;
    std::erase_if(op.releases, [&](const std::string& id) {
      const auto it = made_in.find(id);
      return it == made_in.end() || it->second != region;
    });
  }
}

// The bytes of each storage the regions keep, once each; the program's inputs, alive all run
// whatever keeps them, are not counted.
Bytes KeptBytes(const FsdpModel& model) {
  std::map<std::string, std::pair<std::string, Bytes>, std::less<>> storage;  // id -> root, size
  for (const ProgramTensor& t : model.inputs) storage[t.id] = {t.id, 0};
  for (const ForwardOp& op : model.forward) {
    for (const ProgramTensor& t : op.outputs) {
      storage[t.id] = t.alias.empty() ? std::pair(t.id, t.bytes) : storage.at(t.alias);
    }
  }
  std::set<std::string, std::less<>> counted;
  Bytes bytes = 0;
  for (const ForwardOp& op : model.forward) {
    if (op.kind != OpKind::kCheckpointBegin) continue;
    for (const SavedTensor& save : op.saves) {
      const auto& [root, size] = storage.at(save.tensor);
      if (counted.insert(root).second) bytes += size;
    }
  }
  return bytes;
}

}  // namespace

Result<CheckpointChoice> ParseCheckpointChoice(std::string_view text) {
  CheckpointChoice choice;
  if (text == "none") return choice;
  if (text == "all") {
    choice.kind = CheckpointChoice::Kind::kAll;
    return choice;
  }
  choice.kind = CheckpointChoice::Kind::kClasses;
  for (std::string_view type : SplitCommaList(text)) {
    if (type.empty() || type == "none" || type == "all") {
      return InvalidArgument(fmt::format(
          "'{}': expected none, all, or module class names separated by commas (Block,MLP)", text));
    }
    choice.classes.emplace_back(type);
  }
  return choice;
}

Result<bool> ParseCheckpointReentrant(std::string_view text) {
  if (text == "reentrant") return true;
  if (text == "no-reentrant") return false;
  return InvalidArgument(
      fmt::format("'{}': expected reentrant or no-reentrant (PyTorch's CheckpointImpl)", text));
}

Result<CheckpointSummary> CheckpointModules(FsdpModel& model, const CheckpointChoice& choice) {
  const bool places = choice.kind != CheckpointChoice::Kind::kNone;
  std::vector<std::string> classes;
  if (places) {
    Result<std::vector<std::string>> named = ChosenClasses(model, choice);
    if (!named.ok()) return named.status();
    classes = std::move(*named);
  }
  CheckpointSummary summary;
  FsdpModel checkpointed = model;
  summary.removed = RemoveRegions(checkpointed);
  const std::vector<ModuleCall> chosen = ChosenCalls(checkpointed, classes);
  for (const ModuleCall& call : chosen) {
    if (std::find(summary.classes.begin(), summary.classes.end(), call.type) ==
        summary.classes.end()) {
      summary.classes.push_back(call.type);
    }
  }
  std::vector<ForwardOp> forward;
  forward.reserve(checkpointed.forward.size() + 2 * chosen.size());
  ForwardOp region_end;
  region_end.kind = OpKind::kCheckpointEnd;
  auto next = chosen.begin();
  bool open = false;
  std::size_t open_until = 0;  // the end of the region open here
  for (std::size_t i = 0; i <= checkpointed.forward.size(); ++i) {
    if (open && open_until == i) {
      forward.push_back(region_end);
      open = false;
    }
    if (i == checkpointed.forward.size()) break;
    if (next != chosen.end() && next->begin == i) {
      forward.push_back(RegionBegin(checkpointed, next->begin, next->end));
      forward.back().reentrant = choice.reentrant;
      open = true;
      open_until = next->end;
      ++next;
    }
    forward.push_back(std::move(checkpointed.forward[i]));
  }
  checkpointed.forward = std::move(forward);
  checkpointed.module_calls.clear();
  if (!chosen.empty() || summary.removed > 0) {
    checkpointed.description += fmt::format(
        "{}{}", checkpointed.description.empty() ? "" : "; ",
        chosen.empty() ? std::string("not checkpointed")
                       : fmt::format("checkpointed: {}", fmt::join(summary.classes, ", ")));
  }
  DropReleasesAcrossRegions(checkpointed);
  summary.regions = chosen.size();
  summary.kept_bytes = KeptBytes(checkpointed);
  // The regions are placed on calls ValidateProgram checked; a program it refuses now is a
  // fault here, reported rather than emitted.
  if (Status valid = ValidateProgram(checkpointed); !valid.ok()) {
    return InvalidArgument(fmt::format(
        "the program with its regions placed is not one the emitter can run (a bucketsim bug; "
        "please report it with the program): {}",
        valid.message()));
  }
  model = std::move(checkpointed);
  return summary;
}

}  // namespace bucketsim
