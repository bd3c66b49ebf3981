// The model program of `bucketsim gen program` (a preset's --emit-program, the recorder's
// output). Three promises are checked on every input the reader accepts: the writer's output
// reads back to the same program (written again, byte for byte the same text: program_file.h);
// the emitter, under each FSDP implementation (fairscale's, PyTorch's FSDP1 and FSDP2, FSDP1
// with SHARD_GRAD_OP and post-backward prefetch, and FSDP2 in bf16 with the root's output in
// fp32, whose casts at the units' boundaries are runs added to the program), either refuses the
// program with an error (never the casts' "internal error") or emits a trace; and what it emits is
// a valid trace, since ValidateProgram accepted its program (the trace checker rejecting an event
// is a finding, not bad input). A recorded model's "fsdp" key either maps to gen flags or is
// refused with an error; its units' own settings (prefetch lists, reshard_after_forward,
// backward_prefetch) are emitted with, where its names allow them. The program with its fp32
// activations cast to bf16 (`gen program
// --activation-dtype param-dtype`) emits a valid trace too, or the cast refuses it. Its module
// calls checkpointed (`gen program --checkpoint` none, all, and the first call's class) give a
// program that emits a valid trace, or are refused for want of calls or of such a class; never a
// program the checks refuse. So does the program at another batch size (`gen program --batch-size`:
// the smallest checked, and 3 more than its own), or the scaling refuses it; and so does the
// program re-wrapped (`--wrap`: the root alone, the first call's class), or the wrapping refuses it
// (RewrapModules checks what it made: a refusal is never a finding).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/trace_checker.h"
#include "fuzz_input.h"
#include "gen/fsdp_emitter.h"
#include "gen/gen_options.h"
#include "gen/model_program.h"
#include "gen/program_batch.h"
#include "gen/program_checkpoint.h"
#include "gen/program_precision.h"
#include "gen/program_wrap.h"
#include "io/model_program_file.h"

namespace bucketsim {
namespace {

// Every tensor's bytes, the inputs then the forward's in ForEachForwardTensor's order.
std::vector<Bytes> AllBytes(const ModelProgram& model) {
  std::vector<Bytes> bytes;
  const auto add = [&](const auto& tensor) { bytes.push_back(tensor.bytes); };
  for (const ProgramTensor& input : model.inputs) add(input);
  ForEachForwardTensor(model, add);
  return bytes;
}

// Forwards to the checker and remembers whether it was the checker that refused.
class CheckedSink final : public EventSink {
 public:
  Status OnHeader(const TraceHeader& header) override { return Note(checker_.OnHeader(header)); }
  Status OnEvent(const Event& event) override {
    // A span's duration is what a trace file may carry: a finite number, not negative.
    if (event.kind == EventKind::kCompute && !(std::isfinite(event.dur_us) && event.dur_us >= 0)) {
      return Note(InvalidTrace(fmt::format("compute span of {} us", event.dur_us)));
    }
    return Note(checker_.OnEvent(event));
  }
  Status OnEnd() override { return Note(checker_.OnEnd()); }
  const Status& refusal() const { return refusal_; }

 private:
  Status Note(Status status) {
    if (!status.ok()) refusal_ = status;
    return status;
  }
  TraceChecker checker_{nullptr};
  Status refusal_ = Status::Ok();
};

[[noreturn]] void Finding(const std::string& what) {
  std::fprintf(stderr, "program_fuzz: %s\n", what.c_str());
  std::abort();
}

}  // namespace
}  // namespace bucketsim

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bucketsim;
  Result<ModelProgram> model = ParseProgram("fuzz.json", fuzz::AsText(data, size));
  if (!model.ok()) return 0;

  std::ostringstream written;
  WriteProgram(*model, written);
  Result<ModelProgram> again = ParseProgram("rewritten.json", written.str());
  if (!again.ok()) Finding("the writer's output does not read back: " + again.status().message());
  std::ostringstream rewritten;
  WriteProgram(*again, rewritten);
  if (rewritten.str() != written.str()) Finding("the program changed when written a second time");

  // A recorded model's units with settings of their own are emitted with them (when the
  // program's names refuse them, without).
  if (model->fsdp) {
    Result<ProgramFsdpFlags> flags = FsdpFlagsOf(*model->fsdp);
    ModelProgram own = *model;
    if (flags.ok() && SetUnitSettings(*flags, UnitSettingFlags{}, own).ok()) *model = own;
  }

  GenOptions base;
  base.world_size = 2;
  base.iterations = 2;  // the second iteration has the optimizer state and zero_grad behind it
  std::vector<GenOptions> runs(7, base);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    runs[i].fsdp_impl = i == 2 || i == 4 || i == 5 ? FsdpImpl::kFsdp2 : FsdpImpl::kFsdp1;
    runs[i].group_layout = GroupLayout::kShared;
    runs[i].compute_dtype = DType::kFloat32;
  }
  // FSDP2 with bf16 parameters casts the units' fp32 inputs and the root's outputs to fp32
  // (gen/program_boundary_casts.h): runs it adds to the program.
  runs[4].compute_dtype = DType::kBFloat16;
  runs[4].fsdp2.output_dtype = DType::kFloat32;
  runs[3].fsdp1.sharding_strategy = ShardingStrategy::kShardGradOp;
  runs[3].fsdp1.backward_prefetch = BackwardPrefetch::kPost;
  runs[3].compute_dtype = DType::kBFloat16;
  // Each optimizer implementation with a weight decay that makes temporaries where it can.
  runs[1].optimizer_impl = OptimizerImpl::kForeach;
  runs[1].weight_decay = 0.1;
  runs[2].optimizer = OptimizerKind::kAdamW;
  runs[2].optimizer_impl = OptimizerImpl::kFused;
  runs[3].optimizer = OptimizerKind::kSgdMomentum;
  runs[3].weight_decay = 0.1;
  // Priced by a GPU's rates (--gpu), offloaded: the roofline, the host copies, the CPU step.
  runs[5].gpu = "h100-80gb";
  runs[5].offload_params = true;
  runs[5].optimizer = OptimizerKind::kAdamW;
  runs[6].gpu = "l40s-48gb";
  runs[6].gpu_efficiency.compute = 0.5;
  runs[6].offload_params = true;
  // The first run as `gen program` would take the program's own optimizer.
  if (model->optimizer) {
    for (const auto& [flag, value] : OptimizerFlagsOf(*model->optimizer)) {
      const Status set = SetGenOption(runs[0], flag, value);
      if (!set.ok()) {
        Finding("the reader accepted an optimizer --" + flag + " refuses: " + set.message());
      }
    }
  }
  // The what-ifs of gen program, each under one of the runs: the cast under the bf16 one.
  struct WhatIf {
    ModelProgram program;
    std::string what;
    const GenOptions& options;
  };
  std::vector<WhatIf> what_ifs;
  ModelProgram cast = *model;
  if (CastActivations(cast, DType::kBFloat16).ok()) {
    what_ifs.push_back({std::move(cast), "its activations cast to bf16", runs[3]});
  }
  // At another batch shape: the smallest checked, and beyond the recorded one (each dimension
  // recorded; 0 keeps one that is not), then back to where it was recorded from there.
  if (model->batch || model->seq) {
    const auto at = [](const std::optional<RecordedSizes>& sizes, bool smallest) {
      if (!sizes) return std::uint64_t{0};
      return smallest ? sizes->checked.front() : sizes->at + 3;
    };
    for (bool smallest : {true, false}) {
      ModelProgram scaled = *model;
      if (ScaleBatch(scaled, {at(model->batch, smallest), at(model->seq, smallest)}).ok()) {
        what_ifs.push_back({scaled, "at another batch shape", runs[0]});
        const BatchShape back = {model->batch ? model->batch->at : 0,
                                 model->seq ? model->seq->at : 0};
        // The round trip gives every tensor its bytes back (exact integers; FLOPs are not).
        if (ScaleBatch(scaled, back).ok() && AllBytes(scaled) != AllBytes(*model)) {
          Finding("a program put at another batch shape and back has other tensor sizes");
        }
      }
    }
  }
  // Re-wrapped (`gen program --wrap`): to the root alone and to the first call's class.
  std::vector<std::vector<std::string>> wrappings = {{}};
  if (!model->module_calls.empty()) wrappings.push_back({model->module_calls[0].type});
  for (const std::vector<std::string>& classes : wrappings) {
    ModelProgram rewrapped = *model;
    if (RewrapModules(rewrapped, classes).ok()) {
      what_ifs.push_back({std::move(rewrapped), "re-wrapped", runs[2]});
    }
  }
  std::vector<CheckpointChoice> checkpoints = {{}, {CheckpointChoice::Kind::kAll, {}}};
  if (!model->module_calls.empty()) {
    checkpoints.push_back({CheckpointChoice::Kind::kClasses, {model->module_calls[0].type}});
    // ... and non-reentrant (--checkpoint-impl no-reentrant): the recompute stops early.
    checkpoints.push_back(checkpoints.back());
    checkpoints.back().reentrant = false;
  }
  for (const CheckpointChoice& choice : checkpoints) {
    ModelProgram checkpointed = *model;
    Result<CheckpointSummary> placed = CheckpointModules(checkpointed, choice);
    if (!placed.ok()) {
      if (placed.status().message().find("a bucketsim bug") != std::string::npos) {
        Finding("--checkpoint made a program the checks refuse: " + placed.status().message());
      }
      continue;
    }
    what_ifs.push_back({std::move(checkpointed), "checkpointed anew", runs[1]});
  }
  for (std::size_t i = 0; i < runs.size() + what_ifs.size(); ++i) {
    const WhatIf* what_if = i < runs.size() ? nullptr : &what_ifs[i - runs.size()];
    const GenOptions& options = what_if ? what_if->options : runs[i];
    CheckedSink sink;
    const Status emitted = EmitFsdpTrace(what_if ? what_if->program : *model, options, sink);
    if (!sink.refusal().ok()) {
      Finding(std::string(FsdpImplName(options.fsdp_impl)) +
              ": the emitter made an invalid trace of a valid program" +
              (what_if ? " (" + what_if->what + "): " : std::string(": ")) +
              sink.refusal().message());
    }
    // The boundary casts check the program they make: a refusal of theirs is a bug.
    if (emitted.message().find("internal error") != std::string::npos) {
      Finding(std::string(FsdpImplName(options.fsdp_impl)) + ": " + emitted.message());
    }
  }
  return 0;
}
