// Builds a model program (ModelProgram) op by op for the presets: instances, gathers and
// reshards, runs with their inputs, outputs and saves, checkpointed regions. It owns the
// program until Take(); it checks nothing (ValidateProgram does, in the emitter).
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "gen/model_program.h"

namespace bucketsim {

// A program tensor of `bytes` in `dtype`, optionally a view of (sharing storage with) `alias`.
ProgramTensor Tensor(std::string id, Bytes bytes, std::string_view dtype, std::string alias = "");
// An input that gets a new gradient, passes the output's gradient on, or gets none.
RunInput In(std::string id, InputGrad grad = InputGrad::kNew);
// A save of a tensor already made; a new tensor only the backward keeps.
SavedTensor Keep(std::string id);
SavedTensor Fresh(Bytes bytes, std::string_view dtype, std::string name);
NewTensor Workspace(Bytes bytes, std::string_view dtype, std::string name);

class ProgramBuilder {
 public:
  explicit ProgramBuilder(std::string description);

  std::size_t AddInstance(FsdpUnit instance);
  void AddInput(ProgramTensor tensor);
  void Gather(std::size_t instance);
  void EndForward(std::size_t instance);
  void CheckpointBegin(std::vector<SavedTensor> saves, bool reentrant = true);
  void CheckpointEnd();
  // A module's forward begins (the program's module calls: what gen program --checkpoint
  // checkpoints) and ends; calls nest.
  void BeginCall(std::string name, std::string type);
  void EndCall();
  // Appends a run; the returned op (valid until the next call) is filled by the caller.
  ForwardOp& Run(std::string name, double flops, std::vector<std::size_t> uses,
                 std::vector<RunInput> inputs, std::vector<ProgramTensor> outputs,
                 std::vector<SavedTensor> saves = {});
  void SetLoss(std::string id);
  void SetAutocast(std::optional<DType> autocast);

  ModelProgram Take() { return std::move(model_); }

 private:
  void Push(OpKind kind, std::size_t instance);

  ModelProgram model_;
  std::vector<std::size_t> open_calls_;  // indexes into model_.module_calls
};

}  // namespace bucketsim
