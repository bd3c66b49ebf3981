// The writer of model program files (io/model_program_file.h): the header keys pretty-printed, then
// one op per line, in a form the reader gives back unchanged.
#include "io/model_program_file.h"

#include <iostream>
#include <memory>
#include <string_view>

#include <fmt/format.h>

#include "io/atomic_file.h"
#include "io/json_document.h"

namespace bucketsim {
namespace {

using Json = JsonDocument::Json;

Json ShapeJson(const std::vector<std::uint64_t>& shape) {
  Json array = Json::array();
  for (std::uint64_t size : shape) array.push_back(size);
  return array;
}

// Whether a growth term's dimensions are those the program was recorded over.
bool Applies(const GrowthTerm& term, const ModelProgram& model) {
  return (term.sample_power == 0 || model.batch) && (term.token_power == 0 || model.seq);
}

// Writes `growth`'s terms as <what>_per_... keys: those that are not 0, or (`every`) every one
// that applies to the program, so that a growth given explicitly reads back as given.
template <typename T>
void PutGrowth(Json& json, std::string_view what, const Growth<T>& growth,
               const ModelProgram& model, bool every = false) {
  for (std::size_t t = 0; t < kGrowthTerms.size(); ++t) {
    if (growth[t] != T{} || (every && Applies(kGrowthTerms[t], model))) {
      json[fmt::format("{}_{}", what, kGrowthTerms[t].suffix)] = growth[t];
    }
  }
}

Json TensorJson(const ProgramTensor& t, const ModelProgram& model) {
  Json json = {{"id", t.id}, {"bytes", t.bytes}, {"dtype", t.dtype}};
  PutGrowth(json, "bytes", t.bytes_growth, model);
  if (t.shape) json["shape"] = ShapeJson(*t.shape);
  if (!t.name.empty()) json["name"] = t.name;
  if (t.requires_grad) json["requires_grad"] = *t.requires_grad;
  if (!t.alias.empty()) json["alias"] = t.alias;
  return json;
}

Json NewTensorJson(const NewTensor& t, const ModelProgram& model) {
  Json json = {{"bytes", t.bytes}, {"dtype", t.dtype}};
  PutGrowth(json, "bytes", t.bytes_growth, model);
  if (t.shape) json["shape"] = ShapeJson(*t.shape);
  if (!t.name.empty()) json["name"] = t.name;
  return json;
}

Json SavesJson(const std::vector<SavedTensor>& saves, const ModelProgram& model) {
  Json array = Json::array();
  for (const SavedTensor& save : saves) {
    array.push_back(save.tensor.empty() ? NewTensorJson(save.fresh, model)
                                        : Json{{"tensor", save.tensor}});
  }
  return array;
}

Json InputJson(const RunInput& input) {
  switch (input.grad) {
    case InputGrad::kNew:
      return input.tensor;
    case InputGrad::kPass:
      return {{"tensor", input.tensor}, {"grad", "pass"}};
    case InputGrad::kNone:
      return {{"tensor", input.tensor}, {"grad", "none"}};
  }
  return input.tensor;
}

Json OpJson(const ForwardOp& op, const ModelProgram& model) {
  switch (op.kind) {
    case OpKind::kGather:
      return {{"op", "gather"}, {"instance", op.instance}};
    case OpKind::kEndForward:
      return {{"op", "end_forward"}, {"instance", op.instance}};
    case OpKind::kCheckpointBegin: {
      Json json = {{"op", "checkpoint_begin"}, {"saves", SavesJson(op.saves, model)}};
      if (!op.reentrant) json["reentrant"] = false;
      if (!op.early_stop) json["early_stop"] = false;
      return json;
    }
    case OpKind::kCheckpointEnd:
      return {{"op", "checkpoint_end"}};
    case OpKind::kRun:
      break;
  }
  Json json = {{"op", "run"}, {"name", op.name}, {"flops", op.flops}};
  if (op.policy_saved) json["policy"] = "save";
  if (op.backward_flops) json["backward_flops"] = *op.backward_flops;
  PutGrowth(json, "flops", op.flops_growth, model);
  if (op.backward_flops_growth) {
    PutGrowth(json, "backward_flops", *op.backward_flops_growth, model, /*every=*/true);
  }
  if (!op.uses.empty()) json["uses"] = op.uses;
  if (!op.inputs.empty()) {
    Json inputs = Json::array();
    for (const RunInput& input : op.inputs) inputs.push_back(InputJson(input));
    json["inputs"] = std::move(inputs);
  }
  if (!op.outputs.empty()) {
    Json outputs = Json::array();
    for (const ProgramTensor& t : op.outputs) outputs.push_back(TensorJson(t, model));
    json["outputs"] = std::move(outputs);
  }
  if (!op.saves.empty()) json["saves"] = SavesJson(op.saves, model);
  if (!op.workspace.empty()) {
    Json workspace = Json::array();
    for (const NewTensor& t : op.workspace) workspace.push_back(NewTensorJson(t, model));
    json["workspace"] = std::move(workspace);
  }
  if (op.param_reads) json["param_reads"] = *op.param_reads;
  if (!op.releases.empty()) json["releases"] = op.releases;
  return json;
}

Json MeasuredJson(const Measured& m) {
  Json json = Json::object();
  if (m.device) json["device"] = *m.device;
  if (m.torch_version) json["torch_version"] = *m.torch_version;
  if (m.world_size) json["world_size"] = *m.world_size;
  if (m.iterations) json["iterations"] = *m.iterations;
  if (m.note) json["note"] = *m.note;
  if (!m.marks.empty()) {
    Json marks = Json::array();
    for (const MeasuredMark& mark : m.marks) {
      Json entry = {{"name", mark.name}};
      if (mark.iteration) entry["iteration"] = *mark.iteration;
      entry["allocated_bytes"] = mark.allocated_bytes;
      marks.push_back(std::move(entry));
    }
    json["marks"] = std::move(marks);
  }
  if (!m.phase_peaks.empty()) {
    Json peaks = Json::array();
    for (const MeasuredPhasePeak& peak : m.phase_peaks) {
      Json entry = {{"phase", peak.phase}};
      if (peak.iteration) entry["iteration"] = *peak.iteration;
      entry["peak_allocated_bytes"] = peak.peak_allocated_bytes;
      peaks.push_back(std::move(entry));
    }
    json["phase_peaks"] = std::move(peaks);
  }
  return json;
}

Json SizesJson(const RecordedSizes& sizes, const char* key) {
  return {{key, sizes.at}, {"checked", sizes.checked}};
}

Json ModuleCallJson(const ModuleCall& call) {
  return {{"name", call.name}, {"class", call.type}, {"ops", Json::array({call.begin, call.end})}};
}

// A low-precision recording's own keys (model_program_reader.cc ReadRecording), with its dtype.
Json LowPrecisionJson(const ModelProgram& low) {
  Json json = {{"dtype", "bf16"}, {"loss", low.loss}};
  json["inputs"] = Json::array();
  for (const ProgramTensor& t : low.inputs) json["inputs"].push_back(TensorJson(t, low));
  json["forward"] = Json::array();
  for (const ForwardOp& op : low.forward) json["forward"].push_back(OpJson(op, low));
  if (!low.held.empty()) json["held"] = low.held;
  if (low.target) json["target"] = Json::parse(low.target->json);
  if (low.batch) json["batch"] = SizesJson(*low.batch, "size");
  if (low.seq) json["seq"] = SizesJson(*low.seq, "length");
  if (!low.module_calls.empty()) {
    json["modules"] = Json::array();
    for (const ModuleCall& call : low.module_calls) json["modules"].push_back(ModuleCallJson(call));
  }
  return json;
}

}  // namespace

void WriteProgram(const ModelProgram& model, std::ostream& out) {
  Json head = {{"format", kProgramFormat},
               {"schema_version", kProgramSchemaVersion},
               {"description", model.description}};
  if (model.autocast) head["autocast"] = std::string(DTypeName(*model.autocast));
  Json instances = Json::array();
  for (const FsdpUnit& instance : model.units) {
    Json params = Json::array();
    for (const GenParam& param : instance.params) {
      Json entry = {{"name", param.name}, {"numel", param.numel}};
      if (param.dim0 != 0) entry["dim0"] = param.dim0;
      if (!param.views.empty()) {
        Json views = Json::array();
        for (const ParamView& view : param.views) {
          Json json = {{"name", view.name}, {"numel", view.numel}};
          if (view.dim0 != 0) json["dim0"] = view.dim0;
          views.push_back(std::move(json));
        }
        entry["views"] = std::move(views);
      }
      params.push_back(std::move(entry));
    }
    Json entry = {{"name", instance.name}, {"params", std::move(params)}};
    if (!instance.mixed_precision) entry["mixed_precision"] = false;
    if (!instance.reshard_after_forward) entry["reshard_after_forward"] = false;
    if (instance.own_group) entry["own_group"] = true;
    instances.push_back(std::move(entry));
  }
  Json inputs = Json::array();
  for (const ProgramTensor& t : model.inputs) inputs.push_back(TensorJson(t, model));

  out << "{\n";
  for (const auto& [key, value] : head.items())
    out << "  \"" << key << "\": " << value.dump() << ",\n";
  out << "  \"instances\": [\n";
  for (std::size_t f = 0; f < instances.size(); ++f) {
    out << "    " << instances[f].dump() << (f + 1 < instances.size() ? ",\n" : "\n");
  }
  out << "  ],\n  \"inputs\": " << inputs.dump() << ",\n  \"forward\": [\n";
  for (std::size_t i = 0; i < model.forward.size(); ++i) {
    out << "    " << OpJson(model.forward[i], model).dump()
        << (i + 1 < model.forward.size() ? ",\n" : "\n");
  }
  out << "  ],\n  \"loss\": " << Json(model.loss).dump();
  if (!model.held.empty()) out << ",\n  \"held\": " << Json(model.held).dump();
  if (model.fsdp) out << ",\n  \"fsdp\": " << *model.fsdp;
  if (model.optimizer) out << ",\n  \"optimizer\": " << *model.optimizer;
  if (model.target) out << ",\n  \"target\": " << model.target->json;
  if (model.measured) out << ",\n  \"measured\": " << MeasuredJson(*model.measured).dump();
  if (model.batch) out << ",\n  \"batch\": " << SizesJson(*model.batch, "size").dump();
  if (model.seq) out << ",\n  \"seq\": " << SizesJson(*model.seq, "length").dump();
  if (!model.module_calls.empty()) {
    out << ",\n  \"modules\": [\n";
    for (std::size_t c = 0; c < model.module_calls.size(); ++c) {
      out << "    " << ModuleCallJson(model.module_calls[c]).dump()
          << (c + 1 < model.module_calls.size() ? ",\n" : "\n");
    }
    out << "  ]";
  }
  if (model.low_precision) {
    out << ",\n  \"low_precision\": " << LowPrecisionJson(*model.low_precision).dump();
  }
  out << "\n}\n";
}

Status WriteProgramFile(const ModelProgram& model, const std::string& path) {
  if (path == "-") {
    WriteProgram(model, std::cout);
    return std::cout ? Status::Ok() : IoError("cannot write the program to stdout");
  }
  // The program appears at `path` only when complete (io/atomic_file.h).
  Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  WriteProgram(model, (*file)->stream());
  return (*file)->Commit();
}

}  // namespace bucketsim
