// Model program files (traces/README.md, "Model programs"; traces/program-v1.schema.json): the
// strict reader, whose errors name the file and the JSON pointer of what is wrong
// ("m.json: /forward/3/inputs/0: tensor 'h2' is not defined by an earlier run or input"), and
// the writer, whose output the reader gives back unchanged. A program is read whole: it is
// small next to the trace it makes.
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "gen/model_program.h"

namespace bucketsim {

inline constexpr int kProgramSchemaVersion = 1;
inline constexpr std::string_view kProgramFormat = "bucketsim-program";  // its "format"

// Reads and checks a program (structure, types, references: ValidateProgram). An unreadable
// file is an IoError, anything wrong in it an InvalidArgument.
Result<ModelProgram> ReadProgramFile(const std::string& path);
// The same from text; `path` names it in messages.
Result<ModelProgram> ParseProgram(const std::string& path, std::string_view text);

// What a recorded model's "fsdp" key (the FSDP wrapping it already had) says, as `gen` flags
// in bucketsim's spelling: {"fsdp-impl", "fsdp1"}, {"sharding-strategy", "FULL_SHARD"},
// {"backward-prefetch", "pre"}, ... PyTorch settings bucketsim does not model, and units whose
// settings differ from the first's (the flags apply to every unit), are said in `notes`.
struct ProgramFsdpFlags {
  std::vector<std::pair<std::string, std::string>> flags;
  std::vector<std::string> notes;
  // The settings modelled per unit (UnitSettings), each with the flag that overrides it for
  // every unit: the first unit's (`every_unit`, the program's "settings"), and by instance name
  // those of the later units that differ (its "instances").
  UnitSettings every_unit;
  std::vector<std::pair<std::string, UnitSettings>> units;
};
Result<ProgramFsdpFlags> FsdpFlagsOf(const std::string& fsdp_json);
// Which of the settings modelled per unit a flag on the command line gives every unit instead.
struct UnitSettingFlags {
  bool backward_prefetch = false;
  bool reshard_after_forward = false;
  bool modules_to_forward_prefetch = false;
  bool modules_to_backward_prefetch = false;
};
// Sets each instance's FsdpUnit::settings from `recorded`: the first unit's, then what the
// unit has of its own (the program reader checked that "instances" names instances), but for
// the settings `given` leaves to the options. An error names a prefetch list's unit that is not
// one of the program's instances.
Status SetUnitSettings(const ProgramFsdpFlags& recorded, const UnitSettingFlags& given,
                       ModelProgram& program);
// What a recorded model's "optimizer" key says, as `gen` flags: {"optimizer", "adam"},
// {"optimizer-impl", "foreach"}, {"weight-decay", "0.1"}; only the fields it has.
std::vector<std::pair<std::string, std::string>> OptimizerFlagsOf(
    const std::string& optimizer_json);

// Writes `model` as JSON: the header keys pretty-printed, then one op per line.
void WriteProgram(const ModelProgram& model, std::ostream& out);
// Writes to `path` ("-" for stdout); an IoError if it cannot.
Status WriteProgramFile(const ModelProgram& model, const std::string& path);

}  // namespace bucketsim
