#include "gen/preset.h"

#include "gen/convnet_preset.h"
#include "gen/fsdp_emitter.h"
#include "gen/transformer_preset.h"

namespace bucketsim {

Status Preset::Generate(EventSink& sink) const {
  Result<ModelProgram> program = Program();
  if (!program.ok()) return program.status();
  return EmitFsdpTrace(*program, options(), sink);
}

std::vector<std::unique_ptr<Preset>> MakePresets() {
  std::vector<std::unique_ptr<Preset>> presets;
  presets.push_back(MakeTransformerPreset());
  presets.push_back(MakeConvnetPreset());
  return presets;
}

}  // namespace bucketsim
