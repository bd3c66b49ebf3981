// The reader of model program files (io/model_program_file.h); the writer is
// model_program_writer.cc, the recorded settings as flags model_program_settings.cc.
#include "io/model_program_file.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "io/json_document.h"

namespace bucketsim {
namespace {

using Json = JsonDocument::Json;
using Pointer = JsonDocument::Pointer;

constexpr std::string_view kKind = "model program";
constexpr std::string_view kNoBatch =
    "a program recorded at one batch size has no per-sample sizes (the \"batch\" key says at "
    "which sizes they were fitted)";
constexpr std::string_view kNoSeq =
    "a program recorded at one sequence length has no per-token sizes (the \"seq\" key says "
    "at which lengths they were fitted)";

// A growth term's JSON key: "bytes" and per_token2 give "bytes_per_token2".
std::string GrowthKey(std::string_view what, const GrowthTerm& term) {
  return fmt::format("{}_{}", what, term.suffix);
}

// Assigns the value of a Result expression or returns its error.
#define PROGRAM_ASSIGN(lhs, expr)               \
  do {                                          \
    auto result_ = (expr);                      \
    if (!result_.ok()) return result_.status(); \
    lhs = std::move(*result_);                  \
  } while (0)

class ProgramReader {
 public:
  explicit ProgramReader(const JsonDocument& doc) : doc_(doc) {}

  Result<ModelProgram> Read() {
    const Pointer top;
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(top).status());
    std::string format;
    PROGRAM_ASSIGN(format, doc_.String(Pointer("/format")));
    if (format != kProgramFormat) {
      return doc_.Error(Pointer("/format"),
                        fmt::format("expected \"{}\", got \"{}\"", kProgramFormat, format));
    }
    BUCKETSIM_RETURN_IF_ERROR(
        doc_.SchemaVersion(kProgramSchemaVersion, kProgramSchemaVersion).status());
    BUCKETSIM_RETURN_IF_ERROR(
        Keys(top, {"format", "schema_version", "description", "autocast", "instances", "inputs",
                   "forward", "loss", "held", "fsdp", "optimizer", "measured", "modules", "batch",
                   "seq", "target", "low_precision"}));
    if (doc_.Has(Pointer("/description"))) {
      PROGRAM_ASSIGN(model_.description, doc_.String(Pointer("/description")));
    }
    if (doc_.Has(Pointer("/autocast"))) {
      PROGRAM_ASSIGN(model_.autocast, Autocast(Pointer("/autocast")));
    }
    BUCKETSIM_RETURN_IF_ERROR(Instances());
    BUCKETSIM_RETURN_IF_ERROR(ReadRecording(model_));
    if (doc_.Has(Pointer("/fsdp"))) {
      PROGRAM_ASSIGN(model_.fsdp, Fsdp(Pointer("/fsdp")));
    }
    if (doc_.Has(Pointer("/optimizer"))) {
      PROGRAM_ASSIGN(model_.optimizer, Optimizer(Pointer("/optimizer")));
    }
    if (doc_.Has(Pointer("/measured"))) {
      Measured measured;
      PROGRAM_ASSIGN(measured, ReadMeasured(Pointer("/measured")));
      model_.measured = std::move(measured);
    }
    // References: ValidateProgram's messages start with the JSON pointer of the culprit.
    Status valid = ValidateProgram(model_);
    if (!valid.ok()) return InvalidArgument(fmt::format("{}: {}", doc_.path(), valid.message()));
    if (doc_.Has(Pointer("/low_precision"))) BUCKETSIM_RETURN_IF_ERROR(LowPrecision());
    return std::move(model_);
  }

 private:
  // What a recording has of its own, under base_ (the top, or /low_precision): the inputs,
  // the forward, the loss, the held tensors, the batch and sequence fits, the module calls and
  // the target. The rest of a program (instances, wrapping, optimizer) both recordings share.
  Status ReadRecording(ModelProgram& into) {
    if (doc_.Has(At("target"))) {
      PROGRAM_ASSIGN(into.target, Target(At("target")));
    }
    BUCKETSIM_RETURN_IF_ERROR(
        List(At("inputs"), into.inputs, [&](const Pointer& p) { return ReadTensor(p); }));
    std::size_t ops = 0;
    PROGRAM_ASSIGN(ops, Length(At("forward")));
    for (std::size_t i = 0; i < ops; ++i) {
      ForwardOp op;
      PROGRAM_ASSIGN(op, ReadOp(At("forward") / i));
      into.forward.push_back(std::move(op));
    }
    PROGRAM_ASSIGN(into.loss, doc_.String(At("loss")));
    BUCKETSIM_RETURN_IF_ERROR(
        List(At("held"), into.held, [&](const Pointer& p) { return doc_.String(p); }));
    if (doc_.Has(At("batch"))) {
      PROGRAM_ASSIGN(into.batch, ReadSizes(At("batch"), "size", "batch sizes"));
    }
    if (doc_.Has(At("seq"))) {
      PROGRAM_ASSIGN(into.seq, ReadSizes(At("seq"), "length", "sequence lengths"));
    }
    return List(At("modules"), into.module_calls,
                [&](const Pointer& p) { return ReadModuleCall(p); });
  }

  // "low_precision": {"dtype": "bf16", and a recording's own keys}: the same model recorded
  // in bf16 (tools/record_program.py --mixed-precision), sharing this program's instances.
  Status LowPrecision() {
    const Pointer at("/low_precision");
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(
        at, {"dtype", "inputs", "forward", "loss", "held", "modules", "batch", "seq", "target"}));
    std::string dtype;
    PROGRAM_ASSIGN(dtype, doc_.String(at / "dtype"));
    if (dtype != "bf16") {
      return doc_.Error(at / "dtype",
                        fmt::format("expected \"bf16\" (the recorder records the bf16 run), got "
                                    "\"{}\"",
                                    dtype));
    }
    if (model_.autocast) {
      return doc_.Error(at,
                        "a program recorded under autocast has no low-precision recording: "
                        "its activations are autocast's already");
    }
    ModelProgram low;
    low.description = model_.description;
    low.units = model_.units;
    low.fsdp = model_.fsdp;
    low.optimizer = model_.optimizer;
    base_ = at;
    const Status read = ReadRecording(low);
    base_ = Pointer();
    BUCKETSIM_RETURN_IF_ERROR(read);
    Status valid = ValidateProgram(low);
    if (!valid.ok()) {
      return InvalidArgument(fmt::format("{}: /low_precision{}", doc_.path(), valid.message()));
    }
    model_.low_precision = std::make_shared<const ModelProgram>(std::move(low));
    return Status::Ok();
  }

  // `key` under the recording being read.
  Pointer At(const std::string& key) const { return base_ / key; }

  // Every key of the object at `at` must be one of `known`.
  // Refuses a key that is neither in `known` nor a growth key of one of `grows` ("bytes" allows
  // bytes_per_sample, bytes_per_token, ...: kGrowthTerms).
  Status Keys(const Pointer& at, std::initializer_list<std::string_view> known,
              std::initializer_list<std::string_view> grows = {}) const {
    for (const auto& [key, value] : doc_.root().at(at).items()) {
      bool ok = false;
      for (std::string_view k : known) ok = ok || key == k;
      for (std::string_view what : grows) {
        for (const GrowthTerm& term : kGrowthTerms) ok = ok || key == GrowthKey(what, term);
      }
      if (!ok) {
        std::string names;
        for (std::string_view k : known) names += fmt::format("{}{}", names.empty() ? "" : ", ", k);
        for (std::string_view what : grows) names += fmt::format(", {}_per_...", what);
        return doc_.Error(at / key, fmt::format("unknown key (known here: {})", names));
      }
    }
    return Status::Ok();
  }

  Result<std::size_t> Length(const Pointer& at) const {
    Result<const Json*> array = doc_.Array(at);
    if (!array.ok()) return array.status();
    return (*array)->size();
  }

  Result<std::optional<DType>> Autocast(const Pointer& at) const {
    std::string name;
    PROGRAM_ASSIGN(name, doc_.String(at));
    if (name == "fp16") return std::optional<DType>(DType::kFloat16);
    if (name == "bf16") return std::optional<DType>(DType::kBFloat16);
    return doc_.Error(at, fmt::format("expected \"fp16\" or \"bf16\", got \"{}\"", name));
  }

  // The device the program was recorded for: "cuda" or "cpu", a GPU's name, how many runs
  // are attention by each kernel, what the recorder did not model for it, the model's own
  // casts to fp32 that the recording's dtype made no-ops.
  Result<std::optional<RecordedTarget>> Target(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(
        Keys(at, {"device", "gpu", "attention", "unmodelled", "fp32_upcasts"}));
    RecordedTarget target;
    PROGRAM_ASSIGN(target.device, doc_.String(at / "device"));
    if (target.device != "cuda" && target.device != "cpu") {
      return doc_.Error(at / "device",
                        fmt::format("expected \"cuda\" or \"cpu\", got \"{}\"", target.device));
    }
    PROGRAM_ASSIGN(target.gpu, OptionalString(at / "gpu"));
    if (doc_.Has(at / "attention")) {
      BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at / "attention").status());
      for (const auto& [kernel, value] : doc_.root().at(at / "attention").items()) {
        std::uint64_t runs = 0;
        PROGRAM_ASSIGN(runs, doc_.Unsigned(at / "attention" / kernel));
        target.attention.emplace_back(kernel, runs);
      }
    }
    BUCKETSIM_RETURN_IF_ERROR(List(at / "unmodelled", target.unmodelled,
                                   [&](const Pointer& p) { return doc_.String(p); }));
    if (const Pointer upcasts = at / "fp32_upcasts"; doc_.Has(upcasts)) {
      BUCKETSIM_RETURN_IF_ERROR(doc_.Object(upcasts).status());
      BUCKETSIM_RETURN_IF_ERROR(Keys(upcasts, {"calls", "modules"}));
      PROGRAM_ASSIGN(target.fp32_upcasts, doc_.Unsigned(upcasts / "calls"));
      BUCKETSIM_RETURN_IF_ERROR(List(upcasts / "modules", target.fp32_upcast_modules,
                                     [&](const Pointer& p) { return doc_.String(p); }));
    }
    target.json = doc_.root().at(at).dump();
    return std::optional<RecordedTarget>(std::move(target));
  }

  // The FSDP settings a recorded model carried: its shape is checked (an implementation bucketsim
  // knows, settings an object, per-instance entries naming instances), the rest is PyTorch's
  // and kept as JSON text.
  Result<std::optional<std::string>> Fsdp(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"implementation", "settings", "instances"}));
    std::string implementation;
    PROGRAM_ASSIGN(implementation, doc_.String(at / "implementation"));
    // A recorded model's wrapping: PyTorch's (fairscale's is never recorded).
    const std::optional<FsdpImpl> impl = ParseFsdpImpl(implementation);
    if (!impl || *impl == FsdpImpl::kFairscale) {
      return doc_.Error(at / "implementation",
                        fmt::format("expected \"fsdp1\" or \"fsdp2\", got \"{}\"", implementation));
    }
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at / "settings").status());
    if (doc_.Has(at / "instances")) {
      const Json* instances = nullptr;
      PROGRAM_ASSIGN(instances, doc_.Object(at / "instances"));
      for (const auto& [name, settings] : instances->items()) {
        bool known = false;
        for (const FsdpUnit& instance : model_.units) known = known || instance.name == name;
        if (!known) return doc_.Error(at / "instances" / name, "no instance has this name");
        BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at / "instances" / name).status());
      }
    }
    return std::optional<std::string>(doc_.root().at(at).dump());
  }

  // {"name": "adam", "impl": "foreach", "weight_decay": 0.0}: the names of `gen`'s --optimizer
  // and --optimizer-impl; impl and weight_decay may be absent (torch's default then).
  Result<std::optional<std::string>> Optimizer(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"name", "impl", "weight_decay"}));
    std::string name;
    PROGRAM_ASSIGN(name, doc_.String(at / "name"));
    if (name != "sgd" && name != "sgd-momentum" && name != "adam" && name != "adamw") {
      return doc_.Error(at / "name",
                        fmt::format("expected sgd, sgd-momentum, adam or adamw, got \"{}\"", name));
    }
    if (doc_.Has(at / "impl")) {
      std::string impl;
      PROGRAM_ASSIGN(impl, doc_.String(at / "impl"));
      if (impl != "for-loop" && impl != "foreach" && impl != "fused") {
        return doc_.Error(at / "impl",
                          fmt::format("expected for-loop, foreach or fused, got \"{}\"", impl));
      }
    }
    if (doc_.Has(at / "weight_decay")) {
      double decay = 0;
      PROGRAM_ASSIGN(decay, doc_.Number(at / "weight_decay"));
      if (decay < 0) return doc_.Error(at / "weight_decay", "must be >= 0");
    }
    return std::optional<std::string>(doc_.root().at(at).dump());
  }

  Status Instances() {
    const Pointer at("/instances");
    std::size_t count = 0;
    PROGRAM_ASSIGN(count, Length(at));
    if (count == 0) return doc_.Error(at, "a program needs at least one instance (the root)");
    for (std::size_t f = 0; f < count; ++f) {
      const Pointer here = at / f;
      BUCKETSIM_RETURN_IF_ERROR(doc_.Object(here).status());
      BUCKETSIM_RETURN_IF_ERROR(
          Keys(here, {"name", "params", "mixed_precision", "reshard_after_forward", "own_group"}));
      FsdpUnit instance;
      PROGRAM_ASSIGN(instance.name, doc_.String(here / "name"));
      std::size_t params = 0;
      PROGRAM_ASSIGN(params, Length(here / "params"));
      for (std::size_t p = 0; p < params; ++p) {
        const Pointer param_at = here / "params" / p;
        BUCKETSIM_RETURN_IF_ERROR(doc_.Object(param_at).status());
        BUCKETSIM_RETURN_IF_ERROR(Keys(param_at, {"name", "numel", "dim0", "views"}));
        GenParam param;
        PROGRAM_ASSIGN(param.name, doc_.String(param_at / "name"));
        PROGRAM_ASSIGN(param.numel, doc_.Unsigned(param_at / "numel"));
        PROGRAM_ASSIGN(param.dim0, Dim0(param_at / "dim0", param.numel));
        if (param.dim0 != 0 && doc_.Has(param_at / "views")) {
          return doc_.Error(param_at / "dim0",
                            "a flat parameter has no dim 0 of its own: give each view its own");
        }
        BUCKETSIM_RETURN_IF_ERROR(
            List(param_at / "views", param.views, [&](const Pointer& v) { return ReadView(v); }));
        if (doc_.Has(param_at / "views") && param.views.empty()) {
          return doc_.Error(
              param_at / "views",
              "must list at least one view (leave it out for a parameter of its own)");
        }
        instance.params.push_back(std::move(param));
      }
      BUCKETSIM_RETURN_IF_ERROR(OptionalBool(here / "mixed_precision", instance.mixed_precision));
      BUCKETSIM_RETURN_IF_ERROR(
          OptionalBool(here / "reshard_after_forward", instance.reshard_after_forward));
      BUCKETSIM_RETURN_IF_ERROR(OptionalBool(here / "own_group", instance.own_group));
      instance_index_.emplace(instance.name, f);
      model_.units.push_back(std::move(instance));
    }
    return Status::Ok();
  }

  Result<ParamView> ReadView(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"name", "numel", "dim0"}));
    ParamView view;
    PROGRAM_ASSIGN(view.name, doc_.String(at / "name"));
    PROGRAM_ASSIGN(view.numel, doc_.Unsigned(at / "numel"));
    PROGRAM_ASSIGN(view.dim0, Dim0(at / "dim0", view.numel));
    return view;
  }

  // dim0: a parameter's size in dim 0, at least 1 and dividing its numel; 0 when absent.
  Result<Numel> Dim0(const Pointer& at, Numel numel) const {
    if (!doc_.Has(at)) return Numel{0};
    Numel dim0 = 0;
    PROGRAM_ASSIGN(dim0, doc_.Unsigned(at));
    if (dim0 == 0 || numel % dim0 != 0) {
      return doc_.Error(at, fmt::format("{} is not a size in dim 0 of a parameter of {} "
                                        "elements (at least 1, dividing it)",
                                        dim0, numel));
    }
    return dim0;
  }

  Status OptionalBool(const Pointer& at, bool& value) const {
    if (!doc_.Has(at)) return Status::Ok();
    PROGRAM_ASSIGN(value, doc_.Bool(at));
    return Status::Ok();
  }

  // An instance by index or by name.
  Result<std::size_t> InstanceRef(const Pointer& at) const {
    if (!doc_.Has(at)) return doc_.Error(at, "missing (an instance index or name)");
    const Json& value = doc_.root().at(at);
    if (value.is_number_unsigned()) {
      const auto index = value.get<std::uint64_t>();
      if (index >= model_.units.size()) {
        return doc_.Error(at, fmt::format("instance {} is out of range ({} instances)", index,
                                          model_.units.size()));
      }
      return static_cast<std::size_t>(index);
    }
    if (value.is_string()) {
      const auto it = instance_index_.find(value.get<std::string>());
      if (it == instance_index_.end()) {
        return doc_.Error(at, fmt::format("no instance is named '{}'", value.get<std::string>()));
      }
      return it->second;
    }
    return doc_.Error(
        at, fmt::format("expected an instance index or name, got {}", JsonExcerpt(value)));
  }

  Result<std::optional<std::vector<std::uint64_t>>> Shape(const Pointer& at) const {
    if (!doc_.Has(at)) return std::optional<std::vector<std::uint64_t>>();
    std::size_t rank = 0;
    PROGRAM_ASSIGN(rank, Length(at));
    std::vector<std::uint64_t> shape;
    for (std::size_t k = 0; k < rank; ++k) {
      std::uint64_t size = 0;
      PROGRAM_ASSIGN(size, doc_.Unsigned(at / k));
      shape.push_back(size);
    }
    return std::optional<std::vector<std::uint64_t>>(std::move(shape));
  }

  Result<std::string> OptionalString(const Pointer& at) const {
    if (!doc_.Has(at)) return std::string();
    return doc_.String(at);
  }

  // <what>_per_...: each term a number (Unsigned or Number: `read`), 0 when absent; a term of
  // the batch size needs the program's "batch" key, one of the length its "seq" key.
  template <typename T, typename Read>
  Result<Growth<T>> ReadGrowth(const Pointer& at, std::string_view what, Read read) const {
    Growth<T> growth{};
    for (std::size_t t = 0; t < kGrowthTerms.size(); ++t) {
      const Pointer key = at / GrowthKey(what, kGrowthTerms[t]);
      if (!doc_.Has(key)) continue;
      if (kGrowthTerms[t].sample_power > 0 && !doc_.Has(At("batch"))) {
        return doc_.Error(key, std::string(kNoBatch));
      }
      if (kGrowthTerms[t].token_power > 0 && !doc_.Has(At("seq"))) {
        return doc_.Error(key, std::string(kNoSeq));
      }
      PROGRAM_ASSIGN(growth[t], (doc_.*read)(key));
    }
    return growth;
  }
  // A tensor's: whole numbers of bytes, not negative, at most 1 PiB each.
  Result<Growth<std::int64_t>> BytesGrowth(const Pointer& at) const {
    Growth<Bytes> read{};
    PROGRAM_ASSIGN(read, ReadGrowth<Bytes>(at, "bytes", &JsonDocument::Unsigned));
    Growth<std::int64_t> growth{};
    for (std::size_t t = 0; t < kGrowthTerms.size(); ++t) {
      if (read[t] > kMaxSaneBytes) {
        return doc_.Error(at / GrowthKey("bytes", kGrowthTerms[t]), "more than 1 PiB");
      }
      growth[t] = static_cast<std::int64_t>(read[t]);
    }
    return growth;
  }

  Result<ProgramTensor> ReadTensor(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(
        Keys(at, {"id", "bytes", "dtype", "shape", "name", "requires_grad", "alias"}, {"bytes"}));
    ProgramTensor tensor;
    PROGRAM_ASSIGN(tensor.id, doc_.String(at / "id"));
    PROGRAM_ASSIGN(tensor.bytes, doc_.Unsigned(at / "bytes"));
    PROGRAM_ASSIGN(tensor.bytes_growth, BytesGrowth(at));
    PROGRAM_ASSIGN(tensor.dtype, doc_.String(at / "dtype"));
    PROGRAM_ASSIGN(tensor.shape, Shape(at / "shape"));
    PROGRAM_ASSIGN(tensor.name, OptionalString(at / "name"));
    if (doc_.Has(at / "requires_grad")) {
      bool requires_grad = false;
      PROGRAM_ASSIGN(requires_grad, doc_.Bool(at / "requires_grad"));
      tensor.requires_grad = requires_grad;
    }
    PROGRAM_ASSIGN(tensor.alias, OptionalString(at / "alias"));
    if (doc_.Has(at / "alias") && tensor.alias.empty()) {
      return doc_.Error(at / "alias", "must name a tensor");
    }
    return tensor;
  }

  Result<NewTensor> ReadNewTensor(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"bytes", "dtype", "shape", "name"}, {"bytes"}));
    NewTensor tensor;
    PROGRAM_ASSIGN(tensor.bytes, doc_.Unsigned(at / "bytes"));
    PROGRAM_ASSIGN(tensor.bytes_growth, BytesGrowth(at));
    PROGRAM_ASSIGN(tensor.dtype, doc_.String(at / "dtype"));
    PROGRAM_ASSIGN(tensor.shape, Shape(at / "shape"));
    PROGRAM_ASSIGN(tensor.name, OptionalString(at / "name"));
    return tensor;
  }

  Result<SavedTensor> ReadSave(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    SavedTensor save;
    if (doc_.Has(at / "tensor")) {
      BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"tensor"}));
      PROGRAM_ASSIGN(save.tensor, doc_.String(at / "tensor"));
      if (save.tensor.empty()) return doc_.Error(at / "tensor", "must name a tensor");
      return save;
    }
    PROGRAM_ASSIGN(save.fresh, ReadNewTensor(at));
    return save;
  }

  Result<RunInput> ReadInput(const Pointer& at) const {
    RunInput input;
    if (doc_.Has(at) && doc_.root().at(at).is_string()) {
      PROGRAM_ASSIGN(input.tensor, doc_.String(at));
      return input;
    }
    if (!doc_.Has(at) || !doc_.root().at(at).is_object()) {
      return doc_.Error(at, fmt::format("expected a tensor id or {{\"tensor\", \"grad\"}}, got {}",
                                        JsonExcerpt(doc_.root().at(at))));
    }
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"tensor", "grad"}));
    PROGRAM_ASSIGN(input.tensor, doc_.String(at / "tensor"));
    if (doc_.Has(at / "grad")) {
      std::string grad;
      PROGRAM_ASSIGN(grad, doc_.String(at / "grad"));
      if (grad == "new") {
        input.grad = InputGrad::kNew;
      } else if (grad == "pass") {
        input.grad = InputGrad::kPass;
      } else if (grad == "none") {
        input.grad = InputGrad::kNone;
      } else {
        return doc_.Error(at / "grad",
                          fmt::format("expected \"new\", \"pass\" or \"none\", got \"{}\"", grad));
      }
    }
    return input;
  }

  // Reads the array at `at` element by element with `read`.
  template <typename T, typename ReadOne>
  Status List(const Pointer& at, std::vector<T>& out, ReadOne read) const {
    if (!doc_.Has(at)) return Status::Ok();
    std::size_t count = 0;
    PROGRAM_ASSIGN(count, Length(at));
    for (std::size_t k = 0; k < count; ++k) {
      T value;
      PROGRAM_ASSIGN(value, read(at / k));
      out.push_back(std::move(value));
    }
    return Status::Ok();
  }

  Result<ForwardOp> ReadOp(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    std::string kind;
    PROGRAM_ASSIGN(kind, doc_.String(at / "op"));
    ForwardOp op;
    if (kind == "gather" || kind == "end_forward") {
      op.kind = kind == "gather" ? OpKind::kGather : OpKind::kEndForward;
      BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"op", "instance"}));
      PROGRAM_ASSIGN(op.instance, InstanceRef(at / "instance"));
      return op;
    }
    if (kind == "checkpoint_begin") {
      op.kind = OpKind::kCheckpointBegin;
      BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"op", "saves", "reentrant", "early_stop"}));
      BUCKETSIM_RETURN_IF_ERROR(
          List(at / "saves", op.saves, [&](const Pointer& p) { return ReadSave(p); }));
      BUCKETSIM_RETURN_IF_ERROR(OptionalBool(at / "reentrant", op.reentrant));
      BUCKETSIM_RETURN_IF_ERROR(OptionalBool(at / "early_stop", op.early_stop));
      return op;
    }
    if (kind == "checkpoint_end") {
      op.kind = OpKind::kCheckpointEnd;
      BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"op"}));
      return op;
    }
    if (kind != "run") {
      return doc_.Error(at / "op", fmt::format("unknown op '{}' (expected gather, end_forward, "
                                               "run, checkpoint_begin or checkpoint_end)",
                                               kind));
    }
    op.kind = OpKind::kRun;
    BUCKETSIM_RETURN_IF_ERROR(
        Keys(at,
             {"op", "name", "flops", "backward_flops", "uses", "inputs", "outputs", "saves",
              "workspace", "param_reads", "releases", "policy"},
             {"flops", "backward_flops"}));
    PROGRAM_ASSIGN(op.name, doc_.String(at / "name"));
    if (doc_.Has(at / "policy")) {
      std::string policy;
      PROGRAM_ASSIGN(policy, doc_.String(at / "policy"));
      if (policy != "save" && policy != "recompute") {
        return doc_.Error(at / "policy",
                          fmt::format("expected \"save\" or \"recompute\", got \"{}\"", policy));
      }
      op.policy_saved = policy == "save";
    }
    if (doc_.Has(at / "flops")) PROGRAM_ASSIGN(op.flops, doc_.Number(at / "flops"));
    if (doc_.Has(at / "backward_flops")) {
      double flops = 0;
      PROGRAM_ASSIGN(flops, doc_.Number(at / "backward_flops"));
      op.backward_flops = flops;
    }
    PROGRAM_ASSIGN(op.flops_growth, ReadGrowth<double>(at, "flops", &JsonDocument::Number));
    Growth<double> backward{};
    PROGRAM_ASSIGN(backward, ReadGrowth<double>(at, "backward_flops", &JsonDocument::Number));
    for (const GrowthTerm& term : kGrowthTerms) {
      if (doc_.Has(at / GrowthKey("backward_flops", term))) op.backward_flops_growth = backward;
    }
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "uses", op.uses, [&](const Pointer& p) { return InstanceRef(p); }));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "inputs", op.inputs, [&](const Pointer& p) { return ReadInput(p); }));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "outputs", op.outputs, [&](const Pointer& p) { return ReadTensor(p); }));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "saves", op.saves, [&](const Pointer& p) { return ReadSave(p); }));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "workspace", op.workspace, [&](const Pointer& p) { return ReadNewTensor(p); }));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "releases", op.releases, [&](const Pointer& p) { return doc_.String(p); }));
    if (doc_.Has(at / "param_reads")) {
      std::vector<std::string> reads;
      BUCKETSIM_RETURN_IF_ERROR(
          List(at / "param_reads", reads, [&](const Pointer& p) { return doc_.String(p); }));
      op.param_reads = std::move(reads);
    }
    return op;
  }

  Result<std::optional<std::uint64_t>> OptionalUnsigned(const Pointer& at) const {
    if (!doc_.Has(at)) return std::optional<std::uint64_t>();
    std::uint64_t value = 0;
    PROGRAM_ASSIGN(value, doc_.Unsigned(at));
    return std::optional<std::uint64_t>(value);
  }

  Result<std::optional<std::string>> MaybeString(const Pointer& at) const {
    if (!doc_.Has(at)) return std::optional<std::string>();
    std::string value;
    PROGRAM_ASSIGN(value, doc_.String(at));
    return std::optional<std::string>(std::move(value));
  }

  Result<Measured> ReadMeasured(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"device", "torch_version", "world_size", "iterations",
                                        "note", "marks", "phase_peaks"}));
    Measured measured;
    PROGRAM_ASSIGN(measured.device, MaybeString(at / "device"));
    PROGRAM_ASSIGN(measured.torch_version, MaybeString(at / "torch_version"));
    PROGRAM_ASSIGN(measured.note, MaybeString(at / "note"));
    PROGRAM_ASSIGN(measured.world_size, OptionalUnsigned(at / "world_size"));
    PROGRAM_ASSIGN(measured.iterations, OptionalUnsigned(at / "iterations"));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "marks", measured.marks, [&](const Pointer& p) { return ReadMark(p); }));
    BUCKETSIM_RETURN_IF_ERROR(List(at / "phase_peaks", measured.phase_peaks,
                                   [&](const Pointer& p) { return ReadPhasePeak(p); }));
    return measured;
  }

  // {KEY, "checked": [...]}: sizes >= 1, ascending, the one at KEY among them (KEY: "size" for
  // the batch, "length" for the sequence).
  Result<std::optional<RecordedSizes>> ReadSizes(const Pointer& at, std::string_view key,
                                                 std::string_view what) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {key, "checked"}));
    RecordedSizes sizes;
    PROGRAM_ASSIGN(sizes.at, doc_.Unsigned(at / std::string(key)));
    BUCKETSIM_RETURN_IF_ERROR(
        List(at / "checked", sizes.checked, [&](const Pointer& p) { return doc_.Unsigned(p); }));
    for (std::size_t k = 0; k < sizes.checked.size(); ++k) {
      if (sizes.checked[k] == 0 || (k > 0 && sizes.checked[k] <= sizes.checked[k - 1])) {
        return doc_.Error(at / "checked" / k,
                          fmt::format("{} are at least 1, in ascending order", what));
      }
    }
    if (std::find(sizes.checked.begin(), sizes.checked.end(), sizes.at) == sizes.checked.end()) {
      return doc_.Error(at / std::string(key),
                        fmt::format("{} is not among the checked {}", sizes.at, what));
    }
    return std::optional<RecordedSizes>(std::move(sizes));
  }

  // {"name", "class", "ops": [BEGIN, END]}; the range is checked by ValidateProgram.
  Result<ModuleCall> ReadModuleCall(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"name", "class", "ops"}));
    ModuleCall call;
    PROGRAM_ASSIGN(call.name, doc_.String(at / "name"));
    PROGRAM_ASSIGN(call.type, doc_.String(at / "class"));
    if (call.name.empty()) return doc_.Error(at / "name", "must not be empty");
    if (call.type.empty()) return doc_.Error(at / "class", "must not be empty");
    std::size_t bounds = 0;
    PROGRAM_ASSIGN(bounds, Length(at / "ops"));
    if (bounds != 2) {
      return doc_.Error(at / "ops", fmt::format("expected [BEGIN, END] (2 op indexes), got {} "
                                                "element(s)",
                                                bounds));
    }
    PROGRAM_ASSIGN(call.begin, doc_.Unsigned(at / "ops" / 0));
    PROGRAM_ASSIGN(call.end, doc_.Unsigned(at / "ops" / 1));
    return call;
  }

  Result<MeasuredMark> ReadMark(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"name", "iteration", "allocated_bytes"}));
    MeasuredMark mark;
    PROGRAM_ASSIGN(mark.name, doc_.String(at / "name"));
    PROGRAM_ASSIGN(mark.iteration, OptionalUnsigned(at / "iteration"));
    PROGRAM_ASSIGN(mark.allocated_bytes, doc_.Unsigned(at / "allocated_bytes"));
    return mark;
  }

  Result<MeasuredPhasePeak> ReadPhasePeak(const Pointer& at) const {
    BUCKETSIM_RETURN_IF_ERROR(doc_.Object(at).status());
    BUCKETSIM_RETURN_IF_ERROR(Keys(at, {"phase", "iteration", "peak_allocated_bytes"}));
    MeasuredPhasePeak peak;
    PROGRAM_ASSIGN(peak.phase, doc_.String(at / "phase"));
    constexpr std::string_view kPhases[] = {"init", "forward", "backward", "step", "zero_grad"};
    bool known = false;
    for (std::string_view phase : kPhases) known = known || peak.phase == phase;
    if (!known) {
      return doc_.Error(at / "phase",
                        fmt::format("'{}' is not a phase (init, forward, backward, step, "
                                    "zero_grad)",
                                    peak.phase));
    }
    PROGRAM_ASSIGN(peak.iteration, OptionalUnsigned(at / "iteration"));
    PROGRAM_ASSIGN(peak.peak_allocated_bytes, doc_.Unsigned(at / "peak_allocated_bytes"));
    return peak;
  }

  const JsonDocument& doc_;
  Pointer base_;  // the recording being read: the top, or /low_precision
  ModelProgram model_;
  std::map<std::string, std::size_t, std::less<>> instance_index_;
};

#undef PROGRAM_ASSIGN

}  // namespace

Result<ModelProgram> ParseProgram(const std::string& path, std::string_view text) {
  Result<JsonDocument> doc = JsonDocument::Parse(path, kKind, text);
  if (!doc.ok()) return doc.status();
  return ProgramReader(*doc).Read();
}

Result<ModelProgram> ReadProgramFile(const std::string& path) {
  Result<JsonDocument> doc = JsonDocument::Read(path, kKind);
  if (!doc.ok()) return doc.status();
  return ProgramReader(*doc).Read();
}

}  // namespace bucketsim
