#include "policy/policy_spec.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/closest_name.h"

namespace bucketsim {
namespace {

struct Preset {
  std::string_view name;
  Strategy strategy;
  Lifetime lifetime;
  KeyMode key;
  std::optional<double> cap_mb;
  int inflight;
};

constexpr std::array<Preset, 11> kPresets = {{
    {"always-allocated", Strategy::kFairscale, Lifetime::kAlways, KeyMode::kIdentity, std::nullopt,
     1},
    {"backward-only", Strategy::kFairscale, Lifetime::kBackward, KeyMode::kIdentity, std::nullopt,
     1},
    {"per-group-dedup", Strategy::kFairscale, Lifetime::kBackward, KeyMode::kMembers, std::nullopt,
     1},
    {"unbucketed", Strategy::kFairscale, Lifetime::kBackward, KeyMode::kIdentity, 0.0, 1},
    {"ddp", Strategy::kDdp, Lifetime::kAlways, KeyMode::kIdentity, std::nullopt, 1},
    {"zero12", Strategy::kZero12, Lifetime::kBackward, KeyMode::kIdentity, 0.0, 1},
    {"zero3", Strategy::kZero3, Lifetime::kAlways, KeyMode::kIdentity, 0.0, 1},
    {"megatron", Strategy::kMegatron, Lifetime::kAlways, KeyMode::kIdentity, 0.0, 1},
    {"fsdp1", Strategy::kFsdp1, Lifetime::kBackward, KeyMode::kIdentity, 0.0, 1},
    {"fsdp2", Strategy::kFsdp2, Lifetime::kBackward, KeyMode::kIdentity, 0.0, 1},
    {"hold-until-end", Strategy::kFsdp2, Lifetime::kBackward, KeyMode::kIdentity, 0.0, 0},
}};

constexpr std::array<Strategy, 7> kStrategies = {
    Strategy::kFairscale, Strategy::kDdp,   Strategy::kZero12, Strategy::kZero3,
    Strategy::kMegatron,  Strategy::kFsdp1, Strategy::kFsdp2};

PolicySpec FromPreset(const Preset& preset) {
  PolicySpec spec;
  spec.name = std::string(preset.name);
  spec.strategy = preset.strategy;
  spec.lifetime = preset.lifetime;
  spec.key = preset.key;
  spec.cap_mb = preset.cap_mb;
  spec.inflight = preset.inflight;
  return spec;
}

std::string_view KeysOf(Strategy strategy);

// The key names KeysOf lists ("cap=, first_cap=" -> {"cap", "first_cap"}), for suggestions.
std::vector<std::string> KeyNamesOf(Strategy strategy) {
  std::vector<std::string> names;
  std::string_view keys = KeysOf(strategy);
  while (!keys.empty()) {
    std::size_t eq = keys.find('=');
    if (eq == std::string_view::npos) break;
    names.emplace_back(keys.substr(0, eq));
    keys.remove_prefix(std::min(keys.size(), eq + 3));  // past "=, "
  }
  return names;
}

std::string_view KeysOf(Strategy strategy) {
  switch (strategy) {
    case Strategy::kFairscale:
      return "lifetime=, key=, cap=";
    case Strategy::kDdp:
      return "cap=, first_cap=, grad_as_view=";
    case Strategy::kZero12:
      return "reduce_bucket_size=, overlap_comm=";
    case Strategy::kZero3:
      return "reduce_bucket_size=";
    case Strategy::kMegatron:
      return "bucket_size=, distributed_optimizer=, overlap_grad_reduce=, "
             "pad_for_high_nccl_busbw=";
    case Strategy::kFsdp1:
      return "";
    case Strategy::kFsdp2:
      return "inflight=";
  }
  return "";
}

Result<double> ParseNumber(std::string_view key, std::string_view value) {
  double number = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
      !std::isfinite(number)) {
    return InvalidArgument(fmt::format("policy: {} '{}' is not a number", key, value));
  }
  return number;
}

Result<bool> ParseFlag(std::string_view key, std::string_view value) {
  if (value == "0" || value == "false") return false;
  if (value == "1" || value == "true") return true;
  return InvalidArgument(fmt::format("policy: {} '{}' is not 0|1", key, value));
}

// A count of elements or parameters: a whole number >= 1 (5e8 is accepted).
Result<Numel> ParseCount(std::string_view key, std::string_view value) {
  Result<double> number = ParseNumber(key, value);
  if (!number.ok()) return number.status();
  if (*number < 1 || *number != std::floor(*number) || *number > 1e15) {
    return InvalidArgument(fmt::format("policy: {} '{}' is not a whole number >= 1", key, value));
  }
  return static_cast<Numel>(*number);
}

template <typename T>
Status Assign(Result<T> parsed, T& field) {
  if (!parsed.ok()) return parsed.status();
  field = *parsed;
  return Status::Ok();
}

Status SetFairscalePart(PolicySpec& spec, std::string_view key, std::string_view value) {
  if (key == "lifetime") {
    if (value == "always")
      spec.lifetime = Lifetime::kAlways;
    else if (value == "backward")
      spec.lifetime = Lifetime::kBackward;
    else
      return InvalidArgument(fmt::format("policy: lifetime '{}' is not always|backward{}", value,
                                         DidYouMean(value, {"always", "backward"})));
    return Status::Ok();
  }
  if (value == "identity") {
    spec.key = KeyMode::kIdentity;
  } else if (value == "members") {
    spec.key = KeyMode::kMembers;
  } else {
    return InvalidArgument(fmt::format("policy: key '{}' is not identity|members{}", value,
                                       DidYouMean(value, {"identity", "members"})));
  }
  return Status::Ok();
}

Status SetPart(PolicySpec& spec, std::string_view key, std::string_view value) {
  const Strategy s = spec.strategy;
  if (key == "cap" && (s == Strategy::kFairscale || s == Strategy::kDdp)) {
    Result<double> cap = ParseNumber(key, value);
    if (!cap.ok()) {
      return InvalidArgument(fmt::format(
          "policy: cap '{}' is not a number: cap= takes MiB as a plain number (e.g. cap=25)",
          value));
    }
    spec.cap_mb = *cap;
    return Status::Ok();
  }
  if ((key == "lifetime" || key == "key") && s == Strategy::kFairscale) {
    return SetFairscalePart(spec, key, value);
  }
  if (s == Strategy::kDdp) {
    if (key == "first_cap") return Assign(ParseNumber(key, value), spec.first_cap_mb);
    if (key == "grad_as_view") return Assign(ParseFlag(key, value), spec.grad_as_view);
  }
  if (key == "reduce_bucket_size" && (s == Strategy::kZero12 || s == Strategy::kZero3)) {
    return Assign(ParseCount(key, value), spec.reduce_bucket_size);
  }
  if (key == "overlap_comm" && s == Strategy::kZero12) {
    return Assign(ParseFlag(key, value), spec.overlap_comm);
  }
  if (s == Strategy::kMegatron) {
    if (key == "bucket_size") {
      if (value == "auto") {
        spec.bucket_size.reset();
        return Status::Ok();
      }
      Result<Numel> size = ParseCount(key, value);
      if (!size.ok()) return size.status();
      spec.bucket_size = *size;
      return Status::Ok();
    }
    if (key == "distributed_optimizer") {
      return Assign(ParseFlag(key, value), spec.distributed_optimizer);
    }
    if (key == "overlap_grad_reduce")
      return Assign(ParseFlag(key, value), spec.overlap_grad_reduce);
    if (key == "pad_for_high_nccl_busbw") {
      return Assign(ParseFlag(key, value), spec.pad_for_high_nccl_busbw);
    }
  }
  if (key == "inflight" && s == Strategy::kFsdp2) {
    Result<double> n = ParseNumber(key, value);
    if (!n.ok() || *n < 0 || *n != std::floor(*n) || *n > 1e6) {
      return InvalidArgument(
          fmt::format("policy: inflight '{}' is not a whole number >= 0 (0: all)", value));
    }
    spec.inflight = static_cast<int>(*n);
    return Status::Ok();
  }
  if (KeysOf(s).empty()) {
    return InvalidArgument(
        fmt::format("policy: unknown part '{}': strategy {} takes no parts", key, StrategyName(s)));
  }
  return InvalidArgument(fmt::format("policy: unknown part '{}'{} for strategy {} (expected {})",
                                     key, DidYouMean(key, KeyNamesOf(s)), StrategyName(s),
                                     KeysOf(s)));
}

// Splits "a=1,b=2" into parts, calling `f(key, value)` on each.
template <typename F>
Status ForEachPart(std::string_view text, std::string_view parts, F f) {
  while (!parts.empty()) {
    std::size_t comma = parts.find(',');
    std::string_view part = parts.substr(0, comma);
    parts = comma == std::string_view::npos ? std::string_view() : parts.substr(comma + 1);
    std::size_t eq = part.find('=');
    if (eq == std::string_view::npos) {
      return InvalidArgument(fmt::format("policy '{}': part '{}' is not key=value", text, part));
    }
    BUCKETSIM_RETURN_IF_ERROR(f(part.substr(0, eq), part.substr(eq + 1)));
  }
  return Status::Ok();
}

std::optional<Strategy> ParseStrategy(std::string_view name) {
  for (Strategy strategy : kStrategies) {
    if (StrategyName(strategy) == name) return strategy;
  }
  return std::nullopt;
}

}  // namespace

std::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kFairscale:
      return "fairscale";
    case Strategy::kDdp:
      return "ddp";
    case Strategy::kZero12:
      return "zero12";
    case Strategy::kZero3:
      return "zero3";
    case Strategy::kMegatron:
      return "megatron";
    case Strategy::kFsdp1:
      return "fsdp1";
    case Strategy::kFsdp2:
      return "fsdp2";
  }
  return "unknown";
}

std::string PolicySpec::Canonical(double resolved_cap_mb) const {
  switch (strategy) {
    case Strategy::kFairscale:
      return fmt::format("lifetime={},key={},cap={}",
                         lifetime == Lifetime::kAlways ? "always" : "backward",
                         key == KeyMode::kIdentity ? "identity" : "members", resolved_cap_mb);
    case Strategy::kDdp:
      return fmt::format("strategy=ddp,cap={},first_cap={},grad_as_view={}", resolved_cap_mb,
                         first_cap_mb, grad_as_view ? 1 : 0);
    case Strategy::kZero12:
      return fmt::format("strategy=zero12,reduce_bucket_size={},overlap_comm={}",
                         reduce_bucket_size, overlap_comm ? 1 : 0);
    case Strategy::kZero3:
      return fmt::format("strategy=zero3,reduce_bucket_size={}", reduce_bucket_size);
    case Strategy::kMegatron:
      return fmt::format(
          "strategy=megatron,bucket_size={},distributed_optimizer={},overlap_grad_reduce={},"
          "pad_for_high_nccl_busbw={}",
          bucket_size ? fmt::format("{}", *bucket_size) : std::string("auto"),
          distributed_optimizer ? 1 : 0, overlap_grad_reduce ? 1 : 0,
          pad_for_high_nccl_busbw ? 1 : 0);
    case Strategy::kFsdp1:
      return "strategy=fsdp1";
    case Strategy::kFsdp2:
      return fmt::format("strategy=fsdp2,inflight={}", inflight);
  }
  return name;
}

Result<PolicySpec> ParsePolicySpec(std::string_view text) {
  std::string_view head = text.substr(0, text.find(','));
  std::string_view rest =
      head.size() == text.size() ? std::string_view() : text.substr(head.size() + 1);
  PolicySpec spec;
  bool from_preset = false;
  for (const Preset& preset : kPresets) {
    if (head == preset.name) {
      spec = FromPreset(preset);
      from_preset = true;
    }
  }
  if (!from_preset) {
    if (head.find('=') == std::string_view::npos) {
      std::vector<std::string> names;
      for (const Preset& preset : kPresets) names.emplace_back(preset.name);
      return InvalidArgument(fmt::format("unknown policy '{}'{} (known: {})", head,
                                         DidYouMean(head, names), PolicyNamesHelp()));
    }
    rest = text;
  }
  spec.name = std::string(text);
  // The strategy first, wherever it is written, so that every other part is checked against it.
  Status strategy_part = ForEachPart(text, rest, [&](std::string_view key, std::string_view value) {
    if (key != "strategy") return Status::Ok();
    std::optional<Strategy> strategy = ParseStrategy(value);
    if (!strategy) {
      return InvalidArgument(fmt::format(
          "policy: strategy '{}' is not fairscale|ddp|zero12|zero3|megatron|fsdp1|fsdp2", value));
    }
    if (from_preset && *strategy != spec.strategy) {
      return InvalidArgument(fmt::format("policy '{}': preset '{}' is strategy {}, not {}", text,
                                         head, StrategyName(spec.strategy), value));
    }
    if (!from_preset) {
      // The strategy's own defaults, as its preset has them.
      for (const Preset& preset : kPresets) {
        if (preset.strategy == *strategy && preset.strategy != Strategy::kFairscale) {
          spec = FromPreset(preset);
          break;
        }
      }
      spec.strategy = *strategy;
      spec.name = std::string(text);
    }
    return Status::Ok();
  });
  BUCKETSIM_RETURN_IF_ERROR(strategy_part);
  BUCKETSIM_RETURN_IF_ERROR(
      ForEachPart(text, rest, [&](std::string_view key, std::string_view value) {
        return key == "strategy" ? Status::Ok() : SetPart(spec, key, value);
      }));
  return spec;
}

std::string FrameworkSetting(const PolicySpec& spec, double resolved_cap_mb) {
  switch (spec.strategy) {
    case Strategy::kFairscale: {
      std::string setting =
          fmt::format("fairscale.nn.FullyShardedDataParallel(bucket_cap_mb={})", resolved_cap_mb);
      if (spec.lifetime == Lifetime::kAlways) setting += " with fairscale before #633";
      if (spec.key == KeyMode::kMembers) setting += ", buckets keyed by group members (#633 TODO)";
      return setting;
    }
    case Strategy::kDdp: {
      std::string setting =
          fmt::format("DistributedDataParallel(bucket_cap_mb={}, gradient_as_bucket_view={})",
                      resolved_cap_mb, spec.grad_as_view ? "True" : "False");
      if (spec.first_cap_mb != 1.0) {
        setting += fmt::format("; dist._DEFAULT_FIRST_BUCKET_BYTES = {}",
                               static_cast<Bytes>(spec.first_cap_mb * 1024 * 1024));
      }
      return setting;
    }
    case Strategy::kZero12:
      return fmt::format(
          "zero_optimization: {{stage: 2, reduce_bucket_size: {}, overlap_comm: {}}} (stage 1 "
          "alike)",
          spec.reduce_bucket_size, spec.overlap_comm ? "true" : "false");
    case Strategy::kZero3:
      return fmt::format("zero_optimization: {{stage: 3, reduce_bucket_size: {}}}",
                         spec.reduce_bucket_size);
    case Strategy::kMegatron: {
      std::string setting = spec.bucket_size
                                ? fmt::format("--ddp-bucket-size {}", *spec.bucket_size)
                                : std::string("--ddp-bucket-size unset (max(40M, 1M x dp))");
      if (spec.overlap_grad_reduce) setting += " --overlap-grad-reduce";
      if (spec.distributed_optimizer) setting += " --use-distributed-optimizer";
      if (spec.pad_for_high_nccl_busbw) setting += " --ddp-pad-buckets-for-high-nccl-busbw";
      return setting;
    }
    case Strategy::kFsdp1:
      // The trace's own settings where it names them (its fsdp_setting), else FSDP1 itself.
      return spec.setting.empty() ? "torch.distributed.fsdp.FullyShardedDataParallel(...)"
                                  : spec.setting;
    case Strategy::kFsdp2:
      if (!spec.setting.empty() && spec.inflight == 1) return spec.setting;
      if (spec.inflight == 0) {
        return "Megatron-FSDP dynamic buckets (no fsdp_double_buffer): every reduce-scatter "
               "input kept to the end of backward";
      }
      return fmt::format(
          "fully_shard() per FSDP instance; module.set_reduce_scatter_max_input_buffers({}) "
          "(PR #186000; 1 without it)",
          spec.inflight);
  }
  return spec.name;
}

std::string_view FrameworkName(const PolicySpec& spec) {
  switch (spec.strategy) {
    case Strategy::kFairscale:
      return "fairscale FSDP";
    case Strategy::kDdp:
      return "PyTorch DDP";
    case Strategy::kZero12:
      return "DeepSpeed ZeRO-1/2";
    case Strategy::kZero3:
      return "DeepSpeed ZeRO-3";
    case Strategy::kMegatron:
      return "Megatron-Core DDP";
    case Strategy::kFsdp1:
      return "PyTorch FSDP1";
    case Strategy::kFsdp2:
      return spec.inflight == 0 ? "Megatron-FSDP" : "PyTorch FSDP2";
  }
  return "";
}

std::vector<PolicySpec> DefaultPolicies() {
  std::vector<PolicySpec> specs;
  for (const Preset& preset : kPresets) {
    if (preset.strategy == Strategy::kFairscale) specs.push_back(FromPreset(preset));
  }
  return specs;
}

std::vector<PolicySpec> DefaultPoliciesFor(std::optional<FsdpImpl> fsdp_impl) {
  std::vector<PolicySpec> specs;
  const std::string_view own = fsdp_impl ? InfoOf(*fsdp_impl).own_policy : std::string_view();
  for (const Preset& preset : kPresets) {
    if (!own.empty() && preset.name == own) specs.push_back(FromPreset(preset));
  }
  for (PolicySpec& spec : DefaultPolicies()) specs.push_back(std::move(spec));
  return specs;
}

std::optional<FsdpImpl> ImplementationOf(Strategy strategy) {
  switch (strategy) {
    case Strategy::kFsdp1:
      return FsdpImpl::kFsdp1;
    case Strategy::kFsdp2:
      return FsdpImpl::kFsdp2;
    default:
      return std::nullopt;
  }
}

std::vector<PolicySpec> NamedPolicies() {
  std::vector<PolicySpec> specs;
  for (const Preset& preset : kPresets) specs.push_back(FromPreset(preset));
  return specs;
}

std::string PolicyNamesHelp() {
  std::string names;
  for (const Preset& preset : kPresets) names += fmt::format("{}, ", preset.name);
  return names +
         "each optionally followed by ,key=value parts, or the general form "
         "[strategy=fairscale|ddp|zero12|zero3|megatron|fsdp1|fsdp2,]key=value,... "
         "(fairscale: lifetime=always|backward,key=identity|members,cap=MiB)";
}

}  // namespace bucketsim
