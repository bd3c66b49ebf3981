// What the emitter tests on tiny programs share: the FSDP options they emit under and the
// emitted trace rendered one line per event (testing/recording_sink.h's Summarize).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/trace_checker.h"
#include "gen/fsdp_emitter.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "testing/recording_sink.h"

namespace bucketsim::testing {

// fp32, SGD (no optimizer state), one shared group, one iteration.
inline GenOptions TinyFsdpOptions(int world_size) {
  GenOptions options;
  options.world_size = world_size;
  options.iterations = 1;
  options.compute_dtype = DType::kFloat32;
  options.optimizer = OptimizerKind::kSgd;
  options.group_layout = GroupLayout::kShared;
  return options;
}

// Every event of `model`'s trace under `options`, through the checker; the framework's
// all_gather and all_reduce events only with `collectives`.
inline std::vector<std::string> EmitSummary(const ModelProgram& model, const GenOptions& options,
                                            bool collectives = false) {
  RecordingSink recorder;
  TraceChecker checker(&recorder);
  Status status = EmitFsdpTrace(model, options, checker);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return SummarizeAll(recorder, collectives);
}

// The header `model`'s trace under `options` has.
inline TraceHeader EmitHeader(const ModelProgram& model, const GenOptions& options) {
  RecordingSink recorder;
  Status status = EmitFsdpTrace(model, options, recorder);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return recorder.header;
}

}  // namespace bucketsim::testing
