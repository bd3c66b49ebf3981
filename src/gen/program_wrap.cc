#include "gen/program_wrap.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/comma_list.h"

namespace bucketsim {
namespace {

// One parameter as the model names it: a view of a flat parameter, or a parameter of its own.
// Whether `name` is `module` or inside it ("blocks.0.attn.q.weight" is inside "blocks.0").
bool Inside(std::string_view name, std::string_view module) {
  return name.size() > module.size() && name.starts_with(module) && name[module.size()] == '.';
}

// An op that stays: its index in the program without gathers and end_forwards.
struct Stripped {
  std::vector<ForwardOp> ops;
  std::vector<std::size_t> before;                   // old op index -> ops kept before it
  std::optional<std::size_t> root_gather, root_end;  // where the root's were, as `before`
};

Stripped Strip(const ModelProgram& model) {
  Stripped out;
  out.before.resize(model.forward.size() + 1);
  for (std::size_t i = 0; i < model.forward.size(); ++i) {
    out.before[i] = out.ops.size();
    const ForwardOp& op = model.forward[i];
    const bool marker = op.kind == OpKind::kGather || op.kind == OpKind::kEndForward;
    if (marker && op.instance == 0) {
      (op.kind == OpKind::kGather ? out.root_gather : out.root_end) = out.ops.size();
    }
    if (!marker) out.ops.push_back(op);
  }
  out.before[model.forward.size()] = out.ops.size();
  return out;
}

// A gather or end_forward to place before the kept op `at`: the order among those at one place
// is every end (inner first) before every gather (outer first).
struct Marker {
  std::size_t at = 0;
  OpKind kind = OpKind::kGather;
  std::size_t instance = 0;
  std::size_t call = 0;  // its module call (pre-order index); the root's: none
  std::size_t depth = 0;
};

}  // namespace

Result<std::vector<std::string>> ParseWrapClasses(std::string_view text) {
  if (text == "none") return std::vector<std::string>{};
  std::vector<std::string> classes;
  for (std::string_view type : SplitCommaList(text)) {
    if (type.empty() || type == "none") {
      return InvalidArgument(fmt::format(
          "'{}': expected none, or module class names separated by commas (Block,MLP)", text));
    }
    classes.emplace_back(type);
  }
  return classes;
}

Result<WrapSummary> RewrapModules(ModelProgram& model, const std::vector<std::string>& classes) {
  const std::vector<ModuleCall>& calls = model.module_calls;
  BUCKETSIM_RETURN_IF_ERROR(CheckCallClasses(model, classes, "wrap it"));
  for (std::size_t i = 0; i < model.forward.size(); ++i) {
    const ForwardOp& op = model.forward[i];
    if (op.kind == OpKind::kRun && !op.uses.empty() && !op.param_reads) {
      return InvalidArgument(fmt::format(
          "/forward/{}: run '{}' has no param_reads (a program recorded before them): which "
          "parameters a run reads is what re-wrapping places",
          i, op.name));
    }
  }
  // The calls that become instances, in forward order (module_calls is pre-order).
  std::vector<std::size_t> wrapped;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    if (std::find(classes.begin(), classes.end(), calls[c].type) == classes.end()) continue;
    for (std::size_t w : wrapped) {
      if (calls[w].name == calls[c].name) {
        return InvalidArgument(fmt::format(
            "module '{}' ({}) is called more than once in the forward: FSDP gathers a unit once "
            "per forward, so it cannot be one here",
            calls[c].name, calls[c].type));
      }
    }
    wrapped.push_back(c);
  }

  // Every parameter, with its owner (the innermost wrapped module around it) and its order (the
  // first call of the innermost module around it; the root's own first).
  bool flat = false;
  std::vector<ParamView> params;  // every original parameter
  for (const FsdpUnit& instance : model.units) {
    for (const GenParam& param : instance.params) {
      flat = flat || !param.views.empty();
      if (param.views.empty()) params.push_back({param.name, param.numel, param.dim0});
      for (const ParamView& view : param.views) params.push_back(view);
    }
  }
  std::map<std::string, std::size_t, std::less<>> owner;   // parameter name -> new instance
  std::vector<std::pair<std::size_t, std::size_t>> order;  // (module call + 1, index)
  for (std::size_t p = 0; p < params.size(); ++p) {
    std::size_t f = 0, best = 0, module = 0;
    for (std::size_t w = 0; w < wrapped.size(); ++w) {
      const std::string& name = calls[wrapped[w]].name;
      if (Inside(params[p].name, name) && name.size() > best) f = w + 1, best = name.size();
    }
    best = 0;
    for (std::size_t c = 0; c < calls.size(); ++c) {
      if (Inside(params[p].name, calls[c].name) && calls[c].name.size() > best) {
        module = c + 1;
        best = calls[c].name.size();
      }
    }
    if (!owner.emplace(params[p].name, f).second) {
      return InvalidArgument(fmt::format(
          "parameter '{}' is named twice in the program: re-wrapping places parameters by name",
          params[p].name));
    }
    order.emplace_back(module, p);
  }
  std::stable_sort(order.begin(), order.end());
  // Each unit keeps the settings it was recorded with where it was one (the root's, a wrapper's
  // own group), else the defaults.
  std::vector<FsdpUnit> instances(wrapped.size() + 1);
  instances[0].name = model.units.front().name;
  for (std::size_t w = 0; w < wrapped.size(); ++w) instances[w + 1].name = calls[wrapped[w]].name;
  for (FsdpUnit& instance : instances) {
    for (const FsdpUnit& recorded : model.units) {
      if (recorded.name != instance.name) continue;
      instance.mixed_precision = recorded.mixed_precision;
      instance.reshard_after_forward = recorded.reshard_after_forward;
      instance.own_group = recorded.own_group;
    }
  }
  for (const auto& [module, p] : order) {
    FsdpUnit& instance = instances[owner.at(params[p].name)];
    if (!flat) {
      instance.params.push_back({params[p].name, params[p].numel, {}, params[p].dim0});
      continue;
    }
    if (instance.params.empty()) instance.params.push_back({"flat_param_0", 0});
    instance.params.front().numel += params[p].numel;
    instance.params.front().views.push_back(params[p]);
  }

  // The forward: the gathers and end_forwards placed anew around the kept ops.
  Stripped stripped = Strip(model);
  std::vector<Marker> markers;
  if (stripped.root_gather) markers.push_back({*stripped.root_gather, OpKind::kGather, 0, 0, 0});
  for (std::size_t w = 0; w < wrapped.size(); ++w) {
    const ModuleCall& call = calls[wrapped[w]];
    std::size_t depth = 1;
    for (std::size_t v = 0; v < w; ++v) {
      const ModuleCall& outer = calls[wrapped[v]];
      depth += outer.begin <= call.begin && call.end <= outer.end ? 1 : 0;
    }
    markers.push_back({stripped.before[call.begin], OpKind::kGather, w + 1, wrapped[w], depth});
    markers.push_back({stripped.before[call.end], OpKind::kEndForward, w + 1, wrapped[w], depth});
  }
  if (stripped.root_end) markers.push_back({*stripped.root_end, OpKind::kEndForward, 0, 0, 0});
  // At one place: the ends of the calls that end there (inner first), then the gather and end of
  // each call that runs nothing (a module whose forward makes no tensor), then the gathers of the
  // calls that begin there (outer first); the root is the outermost.
  const auto group = [&](const Marker& m) {
    const bool empty = m.instance != 0 && calls[m.call].begin == calls[m.call].end;
    return empty ? 1 : m.kind == OpKind::kEndForward ? 0 : 2;
  };
  std::stable_sort(markers.begin(), markers.end(), [&](const Marker& a, const Marker& b) {
    if (a.at != b.at) return a.at < b.at;
    if (group(a) != group(b)) return group(a) < group(b);
    if (group(a) == 1) {
      if (a.call != b.call) return a.call < b.call;
      return a.kind == OpKind::kGather && b.kind != OpKind::kGather;
    }
    const auto depth = [](const Marker& m) { return m.instance == 0 ? 0 : m.depth; };
    const bool end = group(a) == 0;
    if (depth(a) != depth(b)) return end ? depth(a) > depth(b) : depth(a) < depth(b);
    return end ? a.call > b.call : a.call < b.call;
  });
  std::vector<ForwardOp> forward;
  std::vector<std::size_t> position(stripped.ops.size());  // kept op -> its index in `forward`
  std::vector<std::size_t> marker_at(markers.size());
  auto next = markers.begin();
  for (std::size_t j = 0; j <= stripped.ops.size(); ++j) {
    for (; next != markers.end() && next->at == j; ++next) {
      marker_at[next - markers.begin()] = forward.size();
      ForwardOp op;
      op.kind = next->kind;
      op.instance = next->instance;
      forward.push_back(std::move(op));
    }
    if (j == stripped.ops.size()) break;
    position[j] = forward.size();
    forward.push_back(std::move(stripped.ops[j]));
  }
  // A run uses the instances whose parameters it makes gradients for.
  for (ForwardOp& op : forward) {
    if (op.kind != OpKind::kRun || !op.param_reads) continue;
    op.uses.clear();
    for (const std::string& read : *op.param_reads) {
      const auto it = owner.find(read);
      if (it == owner.end()) {
        return InvalidArgument(
            fmt::format("run '{}' reads '{}', which no instance has", op.name, read));
      }
      if (std::find(op.uses.begin(), op.uses.end(), it->second) == op.uses.end()) {
        op.uses.push_back(it->second);
      }
    }
    std::sort(op.uses.begin(), op.uses.end());
  }
  // The module calls in step: each holds its kept ops and the markers of the wrapped calls
  // inside it (not its own: FSDP's hooks are outside a module's forward).
  std::vector<ModuleCall> moved = calls;
  for (std::size_t c = 0; c < calls.size(); ++c) {
    const std::size_t b = stripped.before[calls[c].begin], e = stripped.before[calls[c].end];
    std::optional<std::size_t> lo, hi;
    const auto take = [&](std::size_t at) {
      lo = std::min(lo.value_or(at), at);
      hi = std::max(hi.value_or(at), at);
    };
    for (std::size_t j = b; j < e; ++j) take(position[j]);
    for (std::size_t m = 0; m < markers.size(); ++m) {
      const Marker& marker = markers[m];
      if (marker.instance == 0 || marker.call <= c) continue;  // the root's, its own, outer ones
      const ModuleCall& inner = calls[marker.call];
      if (calls[c].begin <= inner.begin && inner.end <= calls[c].end) take(marker_at[m]);
    }
    const std::size_t empty_at = b < position.size() ? position[b] : forward.size();
    moved[c].begin = lo.value_or(empty_at);
    moved[c].end = hi ? *hi + 1 : empty_at;
  }

  ModelProgram rewrapped = model;
  WrapSummary summary{model.units.size(), instances.size()};
  rewrapped.units = std::move(instances);
  rewrapped.forward = std::move(forward);
  rewrapped.module_calls = std::move(moved);
  rewrapped.description +=
      fmt::format("{}wrapped: {}", rewrapped.description.empty() ? "" : "; ",
                  classes.empty() ? "the root alone" : fmt::format("{}", fmt::join(classes, ", ")));
  if (Status valid = ValidateProgram(rewrapped); !valid.ok()) {
    return InvalidArgument("the re-wrapped program is not one FSDP can run: " + valid.message());
  }
  model = std::move(rewrapped);
  return summary;
}

}  // namespace bucketsim
