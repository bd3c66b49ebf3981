#include "gen/preset.h"

#include "gen/convnet_preset.h"
#include "gen/transformer_preset.h"

namespace bucketsim {

std::vector<std::unique_ptr<Preset>> MakePresets() {
  std::vector<std::unique_ptr<Preset>> presets;
  presets.push_back(MakeTransformerPreset());
  presets.push_back(MakeConvnetPreset());
  return presets;
}

}  // namespace bucketsim
