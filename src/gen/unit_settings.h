// A unit's own PyTorch settings (UnitSettings, gen/model_program.h) by unit: the one way they
// reach a program's instances, whether a recorded model's "fsdp" key says them
// (io/model_program_file.h SetUnitSettings) or the command line does (`--unit-setting
// SELECTOR:KEY=VALUE`, applied by ApplyWhatIfs after the wrapping, so the names are the emitted
// units'). The emitter reads FsdpUnit::settings first, then the options.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"

namespace bucketsim {

// Settings for the unit `unit` names (an instance name).
using UnitSettingsFor = std::pair<std::string, UnitSettings>;

// Each entry's settings on the instance it names, over what that instance has: a setting an
// entry gives replaces the instance's, one it leaves unset keeps it; later entries win. An
// entry naming no instance is a programming error (callers resolve names first).
void OverlayUnitSettings(const std::vector<UnitSettingsFor>& units, ModelProgram& program);

// Whether `impl` takes the unit setting `key` (its entry's unit_keys, gen/fsdp_impl_options.h).
bool TakesUnitSetting(FsdpImpl impl, std::string_view key);
// The keys `--unit-setting` takes under `impl`, as "a, b" ("" for fairscale, which has none).
std::string UnitSettingKeys(FsdpImpl impl);

// Parses one `--unit-setting SELECTOR:KEY=VALUE` against `program`'s instances for a run with
// `impl`: SELECTOR is an instance name, `root` (the outermost unit: the first gathered), or
// `last` (the last unit the forward gathers, the root aside); KEY and VALUE as the all-units
// flag spells them: reshard_after_forward (fsdp2; true|false|N, as --reshard-after-forward),
// backward_prefetch (fsdp1; pre|post|none, as --backward-prefetch), modules_to_forward_prefetch
// and modules_to_backward_prefetch (fsdp2; unit names, comma-separated, "" for none). An error
// quotes the spec and says what is wrong: its shape, an unknown unit (some names listed), a key
// not of `impl`, a malformed value.
Result<UnitSettingsFor> ParseUnitSetting(std::string_view spec, const ModelProgram& program,
                                         FsdpImpl impl);

// The instance keys of `program` (traces/README.md, "Instance object") that a run with
// `options` does not apply, one sentence each, naming the instances and what applies instead;
// none when every key is applied. reshard_after_forward false and own_group true are
// fairscale's wrapper settings (auto_wrap_bn, a preset's last unit): PyTorch's FSDP1 and FSDP2
// take a unit's own reshard_after_forward from --unit-setting (fsdp2) or its sharding strategy
// (fsdp1), and one process group for every unit; fairscale makes own groups with
// --groups shared-bn-own only (per-instance gives every unit one anyway).
std::vector<std::string> UnappliedInstanceKeys(const ModelProgram& program,
                                               const GenOptions& options);

}  // namespace bucketsim
