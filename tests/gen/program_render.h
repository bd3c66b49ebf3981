// A one-line rendering of each op of a model program, so preset tests can state a program as
// readable text: "gather 1", "end 1", "checkpoint_begin saves=[x]", "checkpoint_end",
// "NAME uses=[1] in=[x, y:pass] out=[h:200, v:100@h] saves=[x, 8 fp32 mean] ws=[10 fp16]".
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/event.h"
#include "gen/model_program.h"

namespace bucketsim::testing {

inline std::string RenderSaves(const std::vector<SavedTensor>& saves) {
  std::string out;
  for (const SavedTensor& save : saves) {
    if (!out.empty()) out += ", ";
    out += save.tensor.empty()
               ? fmt::format("{} {} {}", save.fresh.bytes, save.fresh.dtype, save.fresh.name)
               : save.tensor;
  }
  return out;
}

inline std::string RenderOp(const ForwardOp& op) {
  switch (op.kind) {
    case OpKind::kGather:
      return fmt::format("gather {}", op.instance);
    case OpKind::kEndForward:
      return fmt::format("end {}", op.instance);
    case OpKind::kCheckpointBegin:
      return fmt::format("checkpoint_begin saves=[{}]", RenderSaves(op.saves));
    case OpKind::kCheckpointEnd:
      return "checkpoint_end";
    case OpKind::kRun:
      break;
  }
  std::string line = op.name;
  if (!op.uses.empty()) line += fmt::format(" uses=[{}]", fmt::join(op.uses, ", "));
  std::vector<std::string> inputs;
  for (const RunInput& input : op.inputs) {
    inputs.push_back(input.tensor + (input.grad == InputGrad::kPass   ? ":pass"
                                     : input.grad == InputGrad::kNone ? ":none"
                                                                      : ""));
  }
  line += fmt::format(" in=[{}]", fmt::join(inputs, ", "));
  std::vector<std::string> outputs;
  for (const ProgramTensor& t : op.outputs) {
    outputs.push_back(fmt::format("{}:{}{}", t.id, t.bytes, t.alias.empty() ? "" : "@" + t.alias));
  }
  line += fmt::format(" out=[{}]", fmt::join(outputs, ", "));
  if (!op.saves.empty()) line += fmt::format(" saves=[{}]", RenderSaves(op.saves));
  std::vector<std::string> workspace;
  for (const NewTensor& t : op.workspace)
    workspace.push_back(fmt::format("{} {}", t.bytes, t.dtype));
  if (!workspace.empty()) line += fmt::format(" ws=[{}]", fmt::join(workspace, ", "));
  return line;
}

inline std::vector<std::string> RenderProgram(const ModelProgram& model) {
  std::vector<std::string> lines;
  std::vector<std::string> inputs;
  for (const ProgramTensor& t : model.inputs) inputs.push_back(fmt::format("{}:{}", t.id, t.bytes));
  lines.push_back(fmt::format("inputs {}", fmt::join(inputs, " ")));
  for (const ForwardOp& op : model.forward) lines.push_back(RenderOp(op));
  lines.push_back("loss " + model.loss);
  return lines;
}

// The program's ops by name: "gather NAME", "end NAME", "RUN uses A B", "region".
inline std::vector<std::string> RenderShape(const ModelProgram& model) {
  std::vector<std::string> ops;
  for (const ForwardOp& op : model.forward) {
    const std::string& instance = model.units[op.instance].name;
    switch (op.kind) {
      case OpKind::kGather:
        ops.push_back("gather " + instance);
        break;
      case OpKind::kEndForward:
        ops.push_back("end " + instance);
        break;
      case OpKind::kRun: {
        std::string uses;
        for (std::size_t f : op.uses) uses += " " + model.units[f].name;
        ops.push_back(op.name + (uses.empty() ? "" : " uses" + uses));
        break;
      }
      default:
        ops.push_back("region");
    }
  }
  return ops;
}

// The bytes of every allocation of `category` on `stream` in the backward of iteration 0.
inline std::vector<Bytes> BackwardAllocs(const std::vector<Event>& events, Category category,
                                         StreamId stream) {
  std::vector<Bytes> bytes;
  int iteration = -1;
  Phase phase = Phase::kInit;
  for (const Event& e : events) {
    if (e.kind == EventKind::kIteration) iteration = static_cast<int>(e.id);
    if (e.kind == EventKind::kPhase) phase = e.phase;
    if (e.kind == EventKind::kAlloc && iteration == 0 && phase == Phase::kBackward &&
        e.category == category && e.stream == stream) {
      bytes.push_back(e.bytes);
    }
  }
  return bytes;
}

}  // namespace bucketsim::testing
