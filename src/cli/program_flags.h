// The flags of the commands that take a model program (`gen program`, `tune`): the FSDP
// options every preset shares (GenOptionParams), the what-ifs applied to the program before it
// is emitted (gen/program_what_ifs.h), and the settings a recorded program carries (its "fsdp"
// and "optimizer" keys), taken unless the command line gives them.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "core/status.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/preset_param.h"
#include "gen/program_what_ifs.h"

namespace bucketsim {

// One parameter of a preset or of GenOptionParams as a flag; a value it refuses is a usage
// error (CLI11 prints it with the flag and exits 2).
void AddParamFlag(CLI::App& command, const PresetParam& param);

// The what-if flags, without their dashes, in the order ApplyWhatIfs applies them.
inline constexpr std::array<std::string_view, 9> kWhatIfFlags = {"wrap",
                                                                 "batch-size",
                                                                 "seq-len",
                                                                 "checkpoint",
                                                                 "checkpoint-impl",
                                                                 "checkpoint-save",
                                                                 "checkpoint-every",
                                                                 "checkpoint-early-stop",
                                                                 "activation-dtype"};

// The kWhatIfFlags into `what_ifs`, and the repeatable --unit-setting (not varied by tune).
void AddWhatIfFlags(CLI::App& command, ProgramWhatIfs& what_ifs);

// What a unit has of its own, as PyTorch's setting: "reshard_after_forward=False, ...".
std::string DescribeUnitSettings(const UnitSettings& settings);

// A recorded model that was already wrapped (the program's "fsdp" key) is emitted as it was
// wrapped, and with the optimizer it was recorded with ("optimizer"), each setting unless the
// command line gave its flag (`command`); what was taken is said on stderr ("gen: ..."). The
// settings modelled per unit go to each instance (FsdpUnit::settings).
Status ApplyProgramSettings(ModelProgram& program, const CLI::App& command, GenOptions& options);

}  // namespace bucketsim
