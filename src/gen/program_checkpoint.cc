#include "gen/program_checkpoint.h"

#include <algorithm>
#include <charconv>
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
std::size_t RemoveRegions(ModelProgram& model) {
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
Result<std::vector<std::string>> ChosenClasses(const ModelProgram& model,
                                               const CheckpointChoice& choice) {
  if (choice.kind == CheckpointChoice::Kind::kClasses) {
    BUCKETSIM_RETURN_IF_ERROR(CheckCallClasses(model, choice.classes, "checkpoint its modules"));
    return choice.classes;
  }
  BUCKETSIM_RETURN_IF_ERROR(CheckCallClasses(model, {}, "checkpoint its modules"));
  std::vector<std::string> classes;
  for (std::size_t f = 1; f < model.units.size(); ++f) {
    for (const ModuleCall& call : model.module_calls) {
      if (call.name == model.units[f].name &&
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

bool HoldsRun(const ModelProgram& model, const ModuleCall& call) {
  for (std::size_t i = call.begin; i < call.end; ++i) {
    if (model.forward[i].kind == OpKind::kRun) return true;
  }
  return false;
}

// The calls of `classes` that get a region, in forward order: the outermost ones (calls nest,
// regions do not) that run something.
std::vector<ModuleCall> ChosenCalls(const ModelProgram& model,
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
ForwardOp RegionBegin(const ModelProgram& model, std::size_t begin, std::size_t end) {
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
void DropReleasesAcrossRegions(ModelProgram& model) {
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
Bytes KeptBytes(const ModelProgram& model) {
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

// An op as a policy names it, by its overload packet: "mm" for mm, aten.mm, aten.mm.default,
// torch.ops.aten.mm.default or _c10d_functional.reduce_scatter_tensor.default.
std::string_view PacketName(std::string_view op) {
  for (std::string_view prefix : {"torch.ops.", "ops."}) {
    if (op.starts_with(prefix)) op.remove_prefix(prefix.size());
  }
  for (std::string_view space : {"aten.", "_c10d_functional.", "c10d_functional.", "c10d."}) {
    if (op.starts_with(space)) op.remove_prefix(space.size());
  }
  return op.substr(0, op.find('.'));
}

// The named policies (ParseSavePolicy).
std::optional<std::string_view> NamedSavePolicy(std::string_view name) {
  // torchtitan 9dec370 torchtitan/parallelisms/parallelize_llama.py _save_list and
  // _custom_policy: mm counted alone, every second one recomputed.
  if (name == "torchtitan") {
    return "mm/2,_scaled_dot_product_efficient_attention,_scaled_dot_product_flash_attention,"
           "reduce_scatter_tensor,abs,max";
  }
  // torchtitan b5bcd76c6 torchtitan/distributed/activation_checkpoint.py: the functorch
  // partitioner's compute-intensive ops (torch 2.6 partitioners.py), the other attention
  // kernels, max, topk and the collectives; mm and linear share the counter. Its other rules
  // (a CUDA-to-CPU _to_copy always saved, the MoE router's mm recomputed) are not expressible
  // in a program's run names.
  if (name == "torchtitan-2026") {
    return "mm+linear/2,convolution,convolution_backward,bmm,addmm,"
           "_scaled_dot_product_flash_attention,_scaled_dot_product_efficient_attention,"
           "_flash_attention_forward,_efficient_attention_forward,upsample_bilinear2d,_scaled_mm,"
           "_scaled_dot_product_cudnn_attention,_scaled_dot_product_attention_math,"
           "_scaled_dot_product_fused_attention_overrideable,max,topk,reduce_scatter_tensor,"
           "all_to_all_single";
  }
  return std::nullopt;
}

// Marks the runs `policy` saves in every region of `model`, counting per region forward.
void MarkPolicySaves(ModelProgram& model, const SavePolicy& policy, CheckpointSummary& summary) {
  std::set<std::string, std::less<>> matched;
  std::vector<std::uint64_t> counts(policy.rules.size());
  bool in_region = false;
  for (ForwardOp& op : model.forward) {
    if (op.kind == OpKind::kCheckpointBegin) {
      in_region = true;
      std::fill(counts.begin(), counts.end(), 0);
    }
    if (op.kind == OpKind::kCheckpointEnd) in_region = false;
    if (!in_region || op.kind != OpKind::kRun) continue;
    const std::string_view name = RunOpName(op.name);
    for (std::size_t r = 0; r < policy.rules.size(); ++r) {
      const SavePolicy::Rule& rule = policy.rules[r];
      if (std::find(rule.ops.begin(), rule.ops.end(), name) == rule.ops.end()) continue;
      matched.insert(std::string(name));
      const std::uint64_t every = rule.recompute_every;
      op.policy_saved = every == 0 || ++counts[r] % every != 0;
      if (op.policy_saved) {
        ++summary.saved_runs[std::string(name)];
        for (const ProgramTensor& output : op.outputs) {
          if (output.alias.empty()) summary.saved_bytes += output.bytes;
        }
        for (const SavedTensor& save : op.saves) {
          if (save.tensor.empty()) summary.saved_bytes += save.fresh.bytes;
        }
      }
      break;
    }
  }
  for (const SavePolicy::Rule& rule : policy.rules) {
    for (const std::string& name : rule.ops) {
      if (!matched.contains(name)) summary.unmatched_ops.push_back(name);
    }
  }
}

// The ops the regions' runs are, most frequent first (for a policy that saves none of them).
std::string RegionOps(const ModelProgram& model) {
  std::map<std::string, std::size_t, std::less<>> count;
  bool in_region = false;
  for (const ForwardOp& op : model.forward) {
    if (op.kind == OpKind::kCheckpointBegin) in_region = true;
    if (op.kind == OpKind::kCheckpointEnd) in_region = false;
    if (in_region && op.kind == OpKind::kRun) ++count[std::string(RunOpName(op.name))];
  }
  std::vector<std::pair<std::size_t, std::string>> ranked;
  for (const auto& [name, n] : count) ranked.emplace_back(n, name);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> names;
  for (std::size_t k = 0; k < ranked.size() && k < 12; ++k) {
    names.push_back(fmt::format("{} x{}", ranked[k].second, ranked[k].first));
  }
  return fmt::format("{}{}", fmt::join(names, ", "), ranked.size() > 12 ? ", ..." : "");
}

}  // namespace

Result<std::vector<SaveCandidate>> SaveCandidates(const ModelProgram& model,
                                                  const CheckpointChoice& choice) {
  ModelProgram placed = model;
  CheckpointChoice full = choice;
  full.save.reset();
  BUCKETSIM_RETURN_IF_ERROR(CheckpointModules(placed, full).status());
  std::vector<SaveCandidate> candidates;
  std::map<std::string, std::size_t, std::less<>> in_this_region;
  bool in_region = false;
  for (const ForwardOp& op : placed.forward) {
    if (op.kind == OpKind::kCheckpointBegin) {
      in_region = true;
      in_this_region.clear();
    }
    if (op.kind == OpKind::kCheckpointEnd) in_region = false;
    if (!in_region || op.kind != OpKind::kRun) continue;
    const std::string_view name = RunOpName(op.name);
    auto it = std::find_if(candidates.begin(), candidates.end(),
                           [&](const SaveCandidate& c) { return c.op == name; });
    if (it == candidates.end()) {
      candidates.push_back({std::string(name)});
      it = std::prev(candidates.end());
    }
    ++it->runs;
    it->most_in_a_region = std::max(it->most_in_a_region, ++in_this_region[it->op]);
    it->flops += op.flops;
    for (const ProgramTensor& output : op.outputs) {
      if (output.alias.empty()) it->bytes += output.bytes;
    }
    for (const SavedTensor& save : op.saves) {
      if (save.tensor.empty()) it->bytes += save.fresh.bytes;
    }
  }
  return candidates;
}

std::vector<std::string> GreedySavePolicies(const std::vector<SaveCandidate>& candidates,
                                            std::size_t limit) {
  struct Step {
    const SaveCandidate* op;
    bool half;  // every other call
  };
  std::vector<Step> steps;
  for (const SaveCandidate& c : candidates) {
    if (c.bytes == 0 || c.flops <= 0) continue;
    if (c.most_in_a_region >= 2) steps.push_back({&c, true});
    steps.push_back({&c, false});
  }
  // FLOPs per byte, descending (compared without division); a half step has its op's ratio and
  // comes first.
  std::stable_sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
    return a.op->flops * static_cast<double>(b.op->bytes) >
           b.op->flops * static_cast<double>(a.op->bytes);
  });
  std::vector<std::string> policies;
  std::vector<std::string> items;  // the policy's ops, in the order first added
  for (const Step& step : steps) {
    if (policies.size() >= limit) break;
    const std::string half = step.op->op + "/2";
    const auto at = std::find(items.begin(), items.end(), half);
    if (at != items.end()) {
      *at = step.op->op;
    } else {
      items.push_back(step.half ? half : step.op->op);
    }
    policies.push_back(fmt::format("{}", fmt::join(items, ",")));
  }
  return policies;
}

std::string SavePolicyPython(const SavePolicy& policy) {
  std::string saved, counted;
  for (std::size_t r = 0; r < policy.rules.size(); ++r) {
    const SavePolicy::Rule& rule = policy.rules[r];
    std::vector<std::string> ops;
    for (const std::string& op : rule.ops) ops.push_back("\"" + op + "\"");
    if (rule.recompute_every == 0) {
      saved += fmt::format("{}{}", saved.empty() ? "" : ", ", fmt::join(ops, ", "));
    } else {
      counted += fmt::format("    ({{{}}}, {}),\n", fmt::join(ops, ", "), rule.recompute_every);
    }
  }
  return fmt::format(
      "# --checkpoint-save {}\n"
      "import collections, functools\n"
      "from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts\n"
      "\n"
      "SAVE = {}\n"
      "COUNTED = [  # (ops sharing one counter, N): every N-th call recomputed\n"
      "{}]\n"
      "\n"
      "def _policy(counts, ctx, func, *args, **kwargs):\n"
      "    name = func.overloadpacket.__name__\n"
      "    if name in SAVE:\n"
      "        return CheckpointPolicy.MUST_SAVE\n"
      "    for k, (ops, n) in enumerate(COUNTED):\n"
      "        if name in ops:\n"
      "            key = (ctx.is_recompute, k)\n"
      "            counts[key] += 1\n"
      "            if counts[key] % n:\n"
      "                return CheckpointPolicy.MUST_SAVE\n"
      "    return CheckpointPolicy.PREFER_RECOMPUTE\n"
      "\n"
      "def context_fn():  # checkpoint(block, x, use_reentrant=False, context_fn=context_fn)\n"
      "    return create_selective_checkpoint_contexts(\n"
      "        functools.partial(_policy, collections.defaultdict(int)))\n",
      policy.text, saved.empty() ? "set()" : "{" + saved + "}", counted);
}

std::string_view RunOpName(std::string_view run_name) {
  const std::size_t colon = run_name.rfind(':');
  return colon == std::string_view::npos ? run_name : run_name.substr(colon + 1);
}

Result<SavePolicy> ParseSavePolicy(std::string_view text) {
  if (text == "auto") {
    return InvalidArgument(
        "'auto' is tune's search (tune --vary checkpoint-save=auto), not a policy: name the ops "
        "to save");
  }
  SavePolicy policy;
  policy.text = std::string(text);
  // ';' separates ops too: tune's --vary separates its values by commas.
  std::string spec(NamedSavePolicy(text).value_or(text));
  std::replace(spec.begin(), spec.end(), ';', ',');
  const auto bad = [&](std::string_view why) {
    return InvalidArgument(fmt::format(
        "'{}': {} (expected torchtitan, torchtitan-2026, or ops separated by commas, each OP or "
        "OP[+OP...]/N: their calls share a counter and every N-th is recomputed, as "
        "mm,_scaled_dot_product_flash_attention or mm/2)",
        text, why));
  };
  std::set<std::string, std::less<>> seen;
  for (std::string_view item : SplitCommaList(spec)) {
    SavePolicy::Rule rule;
    std::string_view ops = item;
    if (const std::size_t slash = item.find('/'); slash != std::string_view::npos) {
      ops = item.substr(0, slash);
      const std::string_view every = item.substr(slash + 1);
      std::uint64_t n = 0;
      const auto [end, error] = std::from_chars(every.data(), every.data() + every.size(), n);
      if (error != std::errc() || end != every.data() + every.size() || n < 2) {
        return bad(
            fmt::format("'{}': after '/' comes how often a call is recomputed, an "
                        "integer of 2 or more",
                        item));
      }
      rule.recompute_every = n;
    }
    for (std::size_t at = 0; at <= ops.size();) {
      const std::size_t plus = std::min(ops.find('+', at), ops.size());
      const std::string_view op = PacketName(ops.substr(at, plus - at));
      if (op.empty()) return bad(fmt::format("'{}' names no op", item));
      if (!seen.insert(std::string(op)).second) {
        return bad(fmt::format("'{}' is named twice", op));
      }
      rule.ops.emplace_back(op);
      at = plus + 1;
    }
    if (rule.ops.size() > 1 && rule.recompute_every == 0) {
      return bad(fmt::format("'{}': ops joined by '+' share a counter, which needs /N", item));
    }
    policy.rules.push_back(std::move(rule));
  }
  if (policy.rules.empty()) return bad("no op");
  return policy;
}

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

Result<CheckpointSummary> CheckpointModules(ModelProgram& model, const CheckpointChoice& choice) {
  const bool places = choice.kind != CheckpointChoice::Kind::kNone;
  std::vector<std::string> classes;
  if (places) {
    Result<std::vector<std::string>> named = ChosenClasses(model, choice);
    if (!named.ok()) return named.status();
    classes = std::move(*named);
  }
  if (choice.reentrant && (choice.save || !choice.early_stop)) {
    return InvalidArgument(
        choice.save ? "selective checkpointing needs non-reentrant regions (--checkpoint-impl "
                      "no-reentrant): torch's checkpoint() takes a context_fn only with "
                      "use_reentrant=False"
                    : "early stop is a setting of non-reentrant regions (--checkpoint-impl "
                      "no-reentrant); a reentrant one reruns its whole forward");
  }
  CheckpointSummary summary;
  ModelProgram checkpointed = model;
  summary.removed = RemoveRegions(checkpointed);
  std::vector<ModuleCall> chosen = ChosenCalls(checkpointed, classes);
  summary.calls = chosen.size();
  if (choice.every > 1) {
    std::vector<ModuleCall> every;
    for (std::size_t k = 0; k < chosen.size(); ++k) {
      if ((k + 1) % choice.every == 0) every.push_back(chosen[k]);
    }
    chosen = std::move(every);
  }
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
      forward.back().early_stop = choice.early_stop;
      open = true;
      open_until = next->end;
      ++next;
    }
    forward.push_back(std::move(checkpointed.forward[i]));
  }
  checkpointed.forward = std::move(forward);
  if (choice.save) {
    MarkPolicySaves(checkpointed, *choice.save, summary);
    if (summary.saved_runs.empty() && !chosen.empty()) {
      return InvalidArgument(fmt::format(
          "--checkpoint-save {}: the policy saves none of the checkpointed calls' runs (their "
          "ops: {}; a recorded program names each run MODULE:OP, OP the ATen op's packet)",
          choice.save->text, RegionOps(checkpointed)));
    }
  }
  checkpointed.module_calls.clear();
  if (!chosen.empty() || summary.removed > 0) {
    checkpointed.description += fmt::format(
        "{}{}", checkpointed.description.empty() ? "" : "; ",
        chosen.empty() ? std::string("not checkpointed")
                       : fmt::format("checkpointed: {}{}{}{}", fmt::join(summary.classes, ", "),
                                     choice.every > 1 ? fmt::format(" (every {} of {} calls)",
                                                                    choice.every, summary.calls)
                                                      : "",
                                     choice.save ? ", selective: saving " + choice.save->text : "",
                                     choice.early_stop ? "" : ", no early stop"));
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
