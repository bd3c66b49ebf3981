// The grid of `bucketsim tune` run: each configuration (engine/tune_grid.h) is the model program
// with the varied flags set, the what-ifs applied (gen/program_what_ifs.h) and emitted straight
// into a replay (no trace is written), on up to `threads` threads. In the library, so that the
// benchmark (bench/tune_bench.cc) runs what the command runs.
#ifndef BUCKETSIM_GEN_TUNE_RUNNER_H_
#define BUCKETSIM_GEN_TUNE_RUNNER_H_

#include <string>
#include <vector>

#include "core/status.h"
#include "engine/replay_policies.h"
#include "engine/tune_grid.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/program_what_ifs.h"

namespace bucketsim {

// The varied flag that is not a gen program flag: the bucket policy the configuration replays
// under (--vary policy=fsdp2,backward-only), parsed by ParsePolicySpec.
inline constexpr std::string_view kPolicyFlag = "policy";

// What a varied flag sets: the batch size, the checkpointing or the wrapping (a '+' joins
// classes: Block+MLP),
// the activation dtype, or one of the FSDP options (SetGenOption). Not the policy.
Status SetVaried(GenOptions& options, ProgramWhatIfs& what_ifs, const std::string& flag,
                 const std::string& value);

struct TuneRun {
  const ModelProgram* program = nullptr;  // as read, with its recorded settings in `options`
  GenOptions options;                     // the fixed flags
  ProgramWhatIfs what_ifs;                // the fixed what-ifs
  // Its policies: the one to replay under; empty: each configuration's implementation's own
  // (DefaultPoliciesFor). Its jobs are ignored (each replay runs on one thread).
  ReplayRequest replay;
  unsigned threads = 1;  // 0: one per core
};

// One point per configuration of `grid`, in its order (settings filled); the first error in
// grid order, prefixed with its settings ("batch-size=16, checkpoint=Blok: ...").
Result<std::vector<TunePoint>> RunTuneGrid(const TuneRun& run,
                                           const std::vector<TuneSettings>& grid);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_TUNE_RUNNER_H_
