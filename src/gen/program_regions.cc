#include "gen/program_regions.h"

namespace bucketsim {

CheckpointRegions FindCheckpointRegions(const ModelProgram& model) {
  const std::size_t ops = model.forward.size();
  CheckpointRegions regions{std::vector<std::size_t>(ops, CheckpointRegions::kNone),
                            std::vector<std::size_t>(ops, CheckpointRegions::kNone),
                            std::vector<std::size_t>(ops, CheckpointRegions::kNone),
                            std::vector<std::size_t>(ops, CheckpointRegions::kNone)};
  std::size_t first_saving = CheckpointRegions::kNone;
  std::size_t last_saving = CheckpointRegions::kNone;
  std::size_t begin = CheckpointRegions::kNone;
  for (std::size_t i = 0; i < ops; ++i) {
    const ForwardOp& op = model.forward[i];
    if (op.kind == OpKind::kCheckpointBegin) {
      begin = i;
      regions.stop[begin] = begin;  // nothing to rerun yet
      first_saving = last_saving = CheckpointRegions::kNone;
    }
    regions.region[i] = begin;
    if (begin == CheckpointRegions::kNone) continue;
    if (op.kind == OpKind::kCheckpointEnd) {
      if (model.forward[begin].reentrant) {
        regions.stop[begin] = i - 1;
      } else if (last_saving != CheckpointRegions::kNone) {
        regions.trigger[last_saving] = i;
        regions.frame_release[first_saving] = begin;
        // Without early stop the recompute runs the region's function to its end.
        if (!model.forward[begin].early_stop) regions.stop[begin] = i - 1;
      }
      begin = CheckpointRegions::kNone;
    } else if (op.kind == OpKind::kRun && !op.saves.empty()) {
      regions.stop[begin] = last_saving = i;
      if (first_saving == CheckpointRegions::kNone) first_saving = i;
    }
  }
  return regions;
}

}  // namespace bucketsim
