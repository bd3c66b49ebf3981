#include "gen/program_builder.h"

#include <utility>

namespace bucketsim {

ProgramTensor Tensor(std::string id, Bytes bytes, std::string_view dtype, std::string alias) {
  ProgramTensor tensor;
  tensor.id = std::move(id);
  tensor.bytes = bytes;
  tensor.dtype = std::string(dtype);
  tensor.alias = std::move(alias);
  return tensor;
}

RunInput In(std::string id, InputGrad grad) { return {std::move(id), grad}; }

SavedTensor Keep(std::string id) { return {std::move(id), {}}; }

SavedTensor Fresh(Bytes bytes, std::string_view dtype, std::string name) {
  return {"", Workspace(bytes, dtype, std::move(name))};
}

NewTensor Workspace(Bytes bytes, std::string_view dtype, std::string name) {
  NewTensor tensor;
  tensor.bytes = bytes;
  tensor.dtype = std::string(dtype);
  tensor.name = std::move(name);
  return tensor;
}

ProgramBuilder::ProgramBuilder(std::string description) {
  model_.description = std::move(description);
}

std::size_t ProgramBuilder::AddInstance(FsdpUnit instance) {
  model_.units.push_back(std::move(instance));
  return model_.units.size() - 1;
}

void ProgramBuilder::AddInput(ProgramTensor tensor) { model_.inputs.push_back(std::move(tensor)); }

void ProgramBuilder::Push(OpKind kind, std::size_t instance) {
  ForwardOp op;
  op.kind = kind;
  op.instance = instance;
  model_.forward.push_back(std::move(op));
}

void ProgramBuilder::Gather(std::size_t instance) { Push(OpKind::kGather, instance); }
void ProgramBuilder::EndForward(std::size_t instance) { Push(OpKind::kEndForward, instance); }

void ProgramBuilder::CheckpointBegin(std::vector<SavedTensor> saves, bool reentrant) {
  Push(OpKind::kCheckpointBegin, 0);
  model_.forward.back().saves = std::move(saves);
  model_.forward.back().reentrant = reentrant;
}
void ProgramBuilder::CheckpointEnd() { Push(OpKind::kCheckpointEnd, 0); }

void ProgramBuilder::BeginCall(std::string name, std::string type) {
  open_calls_.push_back(model_.module_calls.size());
  model_.module_calls.push_back(
      {std::move(name), std::move(type), model_.forward.size(), model_.forward.size()});
}

void ProgramBuilder::EndCall() {
  model_.module_calls[open_calls_.back()].end = model_.forward.size();
  open_calls_.pop_back();
}

ForwardOp& ProgramBuilder::Run(std::string name, double flops, std::vector<std::size_t> uses,
                               std::vector<RunInput> inputs, std::vector<ProgramTensor> outputs,
                               std::vector<SavedTensor> saves) {
  ForwardOp& op = model_.forward.emplace_back();
  op.kind = OpKind::kRun;
  op.name = std::move(name);
  op.flops = flops;
  op.uses = std::move(uses);
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.saves = std::move(saves);
  return op;
}

void ProgramBuilder::SetLoss(std::string id) { model_.loss = std::move(id); }
void ProgramBuilder::SetAutocast(std::optional<DType> autocast) { model_.autocast = autocast; }

}  // namespace bucketsim
