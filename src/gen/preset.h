// A trace generator preset: a named model with its own parameters and the options every preset
// shares (gen_options.h), bound to a configuration the preset object owns. `bucketsim gen`
// makes one subcommand per preset from MakePresets(), its flags from Params(); `gen --list`
// prints the same entries, so the flags and the list are one table.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "core/event_sink.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/preset_param.h"

namespace bucketsim {

class Preset {
 public:
  virtual ~Preset() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;  // one line
  virtual std::string_view example() const = 0;  // a command line
  // The model's parameters, then the common ones, bound to this preset's configuration: a
  // fresh preset's values are the defaults.
  virtual std::vector<PresetParam> Params() = 0;
  // The model program of the current configuration; fails on one that describes no model.
  virtual Result<ModelProgram> Program() const = 0;
  // The FSDP options of the current configuration.
  virtual const GenOptions& options() const = 0;
  // Emits the trace of the current configuration: its program through the emitter.
  Status Generate(EventSink& sink) const;
};

// Every preset, in the order `gen --list` shows them.
std::vector<std::unique_ptr<Preset>> MakePresets();

}  // namespace bucketsim
