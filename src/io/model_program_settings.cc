// The settings a recorded program carries (its "fsdp" and "optimizer" keys: PyTorch's names and
// values) said as `gen` flags in bucketsim's spelling (io/model_program_file.h).
#include "io/model_program_file.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/unit_settings.h"
#include "io/json_document.h"

namespace bucketsim {
namespace {

using Json = JsonDocument::Json;

// "bfloat16" -> "bf16", "float32" -> "fp32", "float16" -> "fp16" (the recorder writes torch's
// dtype names without "torch.").
std::optional<std::string> FlagDType(const Json& value) {
  if (!value.is_string()) return std::nullopt;
  const std::string name = value.get<std::string>();
  if (name == "bfloat16") return "bf16";
  if (name == "float32") return "fp32";
  if (name == "float16") return "fp16";
  return std::nullopt;
}

std::string FlagBool(const Json& value) {
  return value.is_boolean() && value.get<bool>() ? "true" : "false";
}

// PyTorch's MixedPrecision / MixedPrecisionPolicy fields as --param-dtype, --reduce-dtype and
// --output-dtype; the rest noted.
void MixedPrecisionFlags(const Json& mp, std::string_view where, ProgramFsdpFlags& out) {
  if (!mp.is_object()) return;
  for (const auto& [field, flag] :
       {std::pair<std::string, std::string>{"param_dtype", "param-dtype"},
        {"reduce_dtype", "reduce-dtype"},
        {"output_dtype", "output-dtype"}}) {
    if (!mp.contains(field) || mp[field].is_null()) continue;
    if (std::optional<std::string> dtype = FlagDType(mp[field])) {
      out.flags.emplace_back(flag, *dtype);
    } else {
      out.notes.push_back(fmt::format("{}.{} {} is not modelled", where, field, mp[field].dump()));
    }
  }
  // FSDP2's cast_forward_inputs (default true) as --cast-forward-inputs; FSDP1's casts are its
  // defaults' (the root's inputs alone), other settings noted.
  if (where == "mp_policy" && mp.contains("cast_forward_inputs") &&
      mp["cast_forward_inputs"].is_boolean() && !mp["cast_forward_inputs"].get<bool>()) {
    out.flags.emplace_back("cast-forward-inputs", "off");
  }
  if (where == "mixed_precision") {
    for (const auto& [field, fallback] :
         {std::pair<std::string, bool>{"cast_forward_inputs", false},
          {"cast_root_forward_inputs", true}}) {
      if (mp.contains(field) && mp[field].is_boolean() && mp[field].get<bool>() != fallback) {
        out.notes.push_back(
            fmt::format("mixed_precision.{} {} is not modelled (FSDP1 casts the "
                        "root's inputs alone, PyTorch's default)",
                        field, mp[field].dump()));
      }
    }
  }
  if (mp.contains("buffer_dtype") && !mp["buffer_dtype"].is_null()) {
    out.notes.push_back(fmt::format(
        "{}.buffer_dtype {}: a program has no module buffers, so it changes nothing here", where,
        mp["buffer_dtype"].dump()));
  }
}

// FSDP1's backward_prefetch as PyTorch names it: "BACKWARD_PRE", "BACKWARD_POST", null.
std::optional<BackwardPrefetch> BackwardPrefetchOf(const Json& value) {
  if (value.is_null()) return BackwardPrefetch::kNone;
  if (value == "BACKWARD_PRE") return BackwardPrefetch::kPre;
  if (value == "BACKWARD_POST") return BackwardPrefetch::kPost;
  return std::nullopt;
}

// The settings of one unit that UnitSettings models, from `s` (the program's "settings", or an
// entry of its "instances"); every other key is left in `rest`. An error names `where` and the
// key.
Status ReadUnitSettings(const Json& s, FsdpImpl impl, std::string_view where, UnitSettings& out,
                        Json& rest) {
  rest = Json::object();
  for (const auto& item : s.items()) {
    const std::string& key = item.key();
    const Json& value = item.value();  // (a lambda cannot capture a structured binding in C++20)
    const auto bad = [&](std::string_view expected) {
      return InvalidArgument(fmt::format("the program's fsdp {}.{} is {}: expected {}", where, key,
                                         value.dump(), expected));
    };
    if (!TakesUnitSetting(impl, key)) {
      rest[key] = value;
    } else if (key == "backward_prefetch") {
      out.backward_prefetch = BackwardPrefetchOf(value);
      if (!out.backward_prefetch) return bad("\"BACKWARD_PRE\", \"BACKWARD_POST\" or null");
    } else if (key == "reshard_after_forward") {
      if (value.is_boolean()) {
        out.reshard_after_forward = UnitSettings::Reshard{value.get<bool>(), 0};
      } else if (value.is_number_integer() && value.get<long long>() > 0 &&
                 value.get<long long>() <= (1 << 20)) {
        out.reshard_after_forward = UnitSettings::Reshard{true, value.get<int>()};
      } else {
        return bad("true, false or a positive int");
      }
    } else if (key == "modules_to_forward_prefetch" || key == "modules_to_backward_prefetch") {
      if (!value.is_array()) return bad("a list of unit names");
      std::vector<std::string> names;
      for (const Json& name : value) {
        if (!name.is_string()) return bad("a list of unit names");
        names.push_back(name.get<std::string>());
      }
      (key == "modules_to_forward_prefetch" ? out.modules_to_forward_prefetch
                                            : out.modules_to_backward_prefetch) = names;
    } else {
      rest[key] = value;
    }
  }
  return Status::Ok();
}

}  // namespace

Status SetUnitSettings(const ProgramFsdpFlags& recorded, const UnitSettingFlags& given,
                       ModelProgram& program) {
  // What a flag gives every unit is the options' (the emitter reads them where a unit has none).
  const auto without_given = [&](UnitSettings s) {
    if (given.backward_prefetch) s.backward_prefetch.reset();
    if (given.reshard_after_forward) s.reshard_after_forward.reset();
    if (given.modules_to_forward_prefetch) s.modules_to_forward_prefetch.reset();
    if (given.modules_to_backward_prefetch) s.modules_to_backward_prefetch.reset();
    return s;
  };
  const auto is_unit = [&](const std::string& name) {
    return std::any_of(program.units.begin(), program.units.end(),
                       [&](const FsdpUnit& instance) { return instance.name == name; });
  };
  for (FsdpUnit& instance : program.units) {
    instance.settings = without_given(recorded.every_unit);
  }
  std::vector<UnitSettingsFor> units;
  for (const auto& [name, unit] : recorded.units) {
    if (is_unit(name)) units.emplace_back(name, without_given(unit));
  }
  OverlayUnitSettings(units, program);
  for (const FsdpUnit& instance : program.units) {
    const UnitSettings& s = instance.settings;
    for (const auto* list : {&s.modules_to_forward_prefetch, &s.modules_to_backward_prefetch}) {
      for (const std::string& name : list->value_or(std::vector<std::string>{})) {
        if (!is_unit(name)) {
          return InvalidArgument(
              fmt::format("the program's fsdp settings of unit {} prefetch {}, which is not one "
                          "of its instances",
                          instance.name, name));
        }
      }
    }
  }
  return Status::Ok();
}

std::vector<std::pair<std::string, std::string>> OptimizerFlagsOf(
    const std::string& optimizer_json) {
  const Json optimizer = Json::parse(optimizer_json, nullptr, /*allow_exceptions=*/false);
  std::vector<std::pair<std::string, std::string>> flags;
  if (!optimizer.is_object()) return flags;
  if (optimizer.contains("name") && optimizer["name"].is_string()) {
    flags.emplace_back("optimizer", optimizer["name"].get<std::string>());
  }
  if (optimizer.contains("impl") && optimizer["impl"].is_string()) {
    flags.emplace_back("optimizer-impl", optimizer["impl"].get<std::string>());
  }
  if (optimizer.contains("weight_decay") && optimizer["weight_decay"].is_number()) {
    flags.emplace_back("weight-decay", fmt::format("{}", optimizer["weight_decay"].get<double>()));
  }
  return flags;
}

Result<ProgramFsdpFlags> FsdpFlagsOf(const std::string& fsdp_json) {
  const Json fsdp = Json::parse(fsdp_json, nullptr, /*allow_exceptions=*/false);
  if (!fsdp.is_object() || !fsdp.contains("settings") || !fsdp["settings"].is_object()) {
    return InvalidArgument("the program's \"fsdp\" key has no settings object");
  }
  ProgramFsdpFlags out;
  const std::string name = fsdp.value("implementation", "");
  const std::optional<FsdpImpl> parsed = ParseFsdpImpl(name);
  if (!parsed || *parsed == FsdpImpl::kFairscale) {
    return InvalidArgument(fmt::format(
        "the program's fsdp implementation is \"{}\": expected \"fsdp1\" or \"fsdp2\"", name));
  }
  const FsdpImpl impl = *parsed;
  const Json& s = fsdp["settings"];
  // The first unit's settings that are modelled per unit, read once: they are also every
  // unit's flags (backward_prefetch, reshard_after_forward).
  Json rest;
  BUCKETSIM_RETURN_IF_ERROR(ReadUnitSettings(s, impl, "settings", out.every_unit, rest));
  const UnitSettings& first = out.every_unit;
  out.flags.emplace_back("fsdp-impl", FsdpImplName(impl));
  if (impl == FsdpImpl::kFsdp1) {
    if (s.contains("sharding_strategy") && s["sharding_strategy"].is_string()) {
      out.flags.emplace_back("sharding-strategy", s["sharding_strategy"].get<std::string>());
    }
    if (first.backward_prefetch) {
      out.flags.emplace_back("backward-prefetch",
                             first.backward_prefetch == BackwardPrefetch::kPre    ? "pre"
                             : first.backward_prefetch == BackwardPrefetch::kPost ? "post"
                                                                                  : "none");
    }
    for (const auto& [field, flag] :
         {std::pair<std::string, std::string>{"forward_prefetch", "forward-prefetch"},
          {"limit_all_gathers", "limit-all-gathers"},
          {"use_orig_params", "use-orig-params"}}) {
      if (s.contains(field)) out.flags.emplace_back(flag, FlagBool(s[field]));
    }
    if (s.contains("mixed_precision"))
      MixedPrecisionFlags(s["mixed_precision"], "mixed_precision", out);
    if (s.contains("cpu_offload") && s["cpu_offload"].is_object()) {
      out.flags.emplace_back("offload-params",
                             FlagBool(s["cpu_offload"].value("offload_params", Json(false))));
    }
  } else {
    if (const std::optional<UnitSettings::Reshard> reshard = first.reshard_after_forward) {
      out.flags.emplace_back("reshard-after-forward", reshard->ranks > 0
                                                          ? std::to_string(reshard->ranks)
                                                      : reshard->reshard ? "true"
                                                                         : "false");
    }
    if (s.contains("mp_policy")) MixedPrecisionFlags(s["mp_policy"], "mp_policy", out);
    if (s.contains("offload_policy") && s["offload_policy"].is_object()) {
      out.flags.emplace_back("offload-params", "true");
    }
  }
  // What each later unit has of its own: the settings modelled per unit; the rest noted.
  if (fsdp.contains("instances") && fsdp["instances"].is_object()) {
    for (const auto& [name, differs] : fsdp["instances"].items()) {
      if (!differs.is_object()) {
        return InvalidArgument(
            fmt::format("the program's fsdp instances.{} is {}: expected an object of settings",
                        name, differs.dump()));
      }
      UnitSettings unit;
      BUCKETSIM_RETURN_IF_ERROR(
          ReadUnitSettings(differs, impl, fmt::format("instances.{}", name), unit, rest));
      if (unit != UnitSettings{}) out.units.emplace_back(name, unit);
      if (!rest.empty()) {
        out.notes.push_back(fmt::format(
            "unit {} was wrapped with {}: the first unit's are emitted for it", name, rest.dump()));
      }
    }
  }
  return out;
}

}  // namespace bucketsim
