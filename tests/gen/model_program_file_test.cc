// Model program files: the writer's output read back gives the same trace, byte for byte, for
// both presets in every configuration the presets have; the reader's errors name the file and
// the JSON pointer.
#include "io/model_program_file.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <sstream>
#include <string>

#include "gen/convnet_preset.h"
#include "gen/fsdp_emitter.h"
#include "gen/program_what_ifs.h"
#include "gen/transformer_preset.h"
#include "io/trace_writer.h"

namespace bucketsim {
namespace {

std::string TraceText(const ModelProgram& model, const GenOptions& options) {
  std::ostringstream out;
  TraceWriter writer(out, "test");
  Status status = EmitFsdpTrace(model, options, writer);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return out.str();
}

std::string ProgramText(const ModelProgram& model) {
  std::ostringstream out;
  WriteProgram(model, out);
  return out.str();
}

// Write, read back, write again: the same text and the same trace.
void ExpectRoundTrip(const ModelProgram& model, const GenOptions& options) {
  const std::string text = ProgramText(model);
  Result<ModelProgram> read = ParseProgram("m.json", text);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(ProgramText(*read), text);
  EXPECT_EQ(TraceText(*read, options), TraceText(model, options));
}

TEST(ProgramFile, TransformerProgramsRoundTrip) {
  TransformerConfig config;
  config.layers = 2;
  config.hidden = 64;
  config.heads = 4;
  config.kv_heads = 2;
  config.seq = 32;
  config.vocab = 100;
  config.device_tflops = 3.3;  // spans that are not round numbers
  for (bool checkpointing : {false, true}) {
    for (bool tied : {false, true}) {
      for (std::optional<DType> autocast :
           {std::optional<DType>(), std::optional(DType::kFloat16)}) {
        config.activation_checkpointing = checkpointing;
        config.tied_embeddings = tied;
        config.autocast = autocast;
        config.compute_dtype = autocast ? DType::kFloat32 : DType::kBFloat16;
        Result<ModelProgram> program = TransformerProgram(config);
        ASSERT_TRUE(program.ok());
        ExpectRoundTrip(*program, config);
      }
    }
  }
}

TEST(ProgramFile, ConvnetProgramsRoundTrip) {
  ConvnetConfig config;
  config.hidden_dim = 8;
  config.image_size = 16;
  for (bool checkpointing : {false, true}) {
    for (std::optional<DType> autocast : {std::optional<DType>(), std::optional(DType::kFloat16)}) {
      config.activation_checkpointing = checkpointing;
      config.autocast = autocast;
      config.group_layout = GroupLayout::kSharedBnOwn;
      Result<ModelProgram> program = ConvnetProgram(config);
      ASSERT_TRUE(program.ok());
      ExpectRoundTrip(*program, config);
    }
  }
}

TEST(ProgramFile, MeasuredAndOptionalFieldsRoundTrip) {
  const std::string text = R"({
  "format": "bucketsim-program", "schema_version": 1, "description": "d", "autocast": "bf16",
  "instances": [{"name": "root", "params": [{"name": "w", "numel": 6}], "own_group": true}],
  "inputs": [{"id": "x", "bytes": 24, "dtype": "torch.float32", "shape": [2, 3], "name": "batch"}],
  "forward": [
    {"op": "gather", "instance": "root"},
    {"op": "run", "name": "mm", "flops": 1.5, "backward_flops": 7, "uses": ["root"],
     "inputs": [{"tensor": "x", "grad": "none"}],
     "outputs": [{"id": "y", "bytes": 8, "dtype": "fp32", "requires_grad": true}],
     "saves": [{"tensor": "x"}, {"bytes": 4, "dtype": "bool", "name": "m"}],
     "workspace": [{"bytes": 2, "dtype": "bf16"}]},
    {"op": "end_forward", "instance": 0}
  ],
  "loss": "y", "held": ["x"],
  "measured": {"device": "cpu", "torch_version": "1.13.0", "world_size": 1, "iterations": 1,
               "note": "n", "marks": [{"name": "after fwd", "iteration": 0, "allocated_bytes": 5}],
               "phase_peaks": [{"phase": "backward", "peak_allocated_bytes": 9}]}
})";
  Result<ModelProgram> model = ParseProgram("m.json", text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->forward[1].uses, std::vector<std::size_t>{0});
  EXPECT_EQ(model->forward[1].inputs[0].grad, InputGrad::kNone);
  EXPECT_EQ(model->forward[1].BackwardFlops(), 7);
  ASSERT_TRUE(model->measured);
  EXPECT_EQ(model->measured->marks[0].allocated_bytes, 5u);
  EXPECT_EQ(model->measured->phase_peaks[0].peak_allocated_bytes, 9u);
  const std::string written = ProgramText(*model);
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
  EXPECT_NE(written.find("\"phase_peaks\":[{\"phase\":\"backward\",\"peak_allocated_bytes\":9}]"),
            std::string::npos);
}

// The settings of a model recorded already wrapped (tools/record_program.py) are PyTorch's:
// kept as they are, written back unchanged.
TEST(ProgramFile, FsdpSettingsRoundTrip) {
  const std::string text = R"({
  "format": "bucketsim-program", "schema_version": 1,
  "instances": [{"name": "root", "params": []}, {"name": "blocks.0", "params": []}],
  "forward": [{"op": "run", "name": "r", "outputs": [{"id": "y", "bytes": 4, "dtype": "fp32"}]}],
  "loss": "y",
  "fsdp": {"implementation": "fsdp2",
           "settings": {"reshard_after_forward": true, "offload_policy": null,
                        "mp_policy": {"param_dtype": "bfloat16", "reduce_dtype": null}},
           "instances": {"blocks.0": {"reshard_after_forward": 2}}}
})";
  Result<ModelProgram> model = ParseProgram("m.json", text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(model->fsdp);
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find("\"fsdp\": {\"implementation\":\"fsdp2\",\"settings\":{\"reshard_after_"
                         "forward\":true,\"offload_policy\":null,\"mp_policy\":{\"param_dtype\":"
                         "\"bfloat16\",\"reduce_dtype\":null}},\"instances\":{\"blocks.0\":{"
                         "\"reshard_after_forward\":2}}}"),
            std::string::npos)
      << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
}

// A recorded model's mixed precision as gen flags: FSDP2's output_dtype and a
// cast_forward_inputs off become flags; FSDP1's casts other than its defaults are noted.
TEST(ProgramFile, RecordedMixedPrecisionCastsAsFlags) {
  Result<ProgramFsdpFlags> fsdp2 = FsdpFlagsOf(R"({"implementation": "fsdp2", "settings": {
      "reshard_after_forward": true, "offload_policy": null,
      "mp_policy": {"param_dtype": "bfloat16", "reduce_dtype": "float32",
                    "output_dtype": "float32", "cast_forward_inputs": false}}})");
  ASSERT_TRUE(fsdp2.ok()) << fsdp2.status().ToString();
  const auto has = [](const ProgramFsdpFlags& flags, const std::string& flag,
                      const std::string& value) {
    return std::find(flags.flags.begin(), flags.flags.end(), std::pair{flag, value}) !=
           flags.flags.end();
  };
  EXPECT_TRUE(has(*fsdp2, "output-dtype", "fp32"));
  EXPECT_TRUE(has(*fsdp2, "cast-forward-inputs", "off"));
  Result<ProgramFsdpFlags> fsdp1 = FsdpFlagsOf(R"({"implementation": "fsdp1", "settings": {
      "sharding_strategy": "FULL_SHARD",
      "mixed_precision": {"param_dtype": "bfloat16", "cast_forward_inputs": true,
                          "cast_root_forward_inputs": true}}})");
  ASSERT_TRUE(fsdp1.ok()) << fsdp1.status().ToString();
  EXPECT_FALSE(has(*fsdp1, "cast-forward-inputs", "off"));
  ASSERT_EQ(fsdp1->notes.size(), 1u) << ::testing::PrintToString(fsdp1->notes);
  EXPECT_EQ(fsdp1->notes[0],
            "mixed_precision.cast_forward_inputs true is not modelled (FSDP1 casts the root's "
            "inputs alone, PyTorch's default)");
}

// The settings modelled per unit: the first unit's for every unit, each later unit's own where
// it differs; a differing setting that is not modelled per unit is noted; a malformed one is an
// error naming it.
TEST(ProgramFile, RecordedUnitSettings) {
  Result<ProgramFsdpFlags> fsdp2 = FsdpFlagsOf(R"({"implementation": "fsdp2", "settings": {
      "reshard_after_forward": true, "offload_policy": null, "mp_policy": null,
      "modules_to_forward_prefetch": [], "modules_to_backward_prefetch": []},
      "instances": {"blocks.0": {"modules_to_forward_prefetch": ["blocks.2", "blocks.1"]},
                    "blocks.1": {"reshard_after_forward": 2, "mp_policy": {"param_dtype": "bfloat16"}},
                    "blocks.2": {"reshard_after_forward": false,
                                 "modules_to_backward_prefetch": ["blocks.0"]}}})");
  ASSERT_TRUE(fsdp2.ok()) << fsdp2.status().ToString();
  UnitSettings every_unit;
  every_unit.reshard_after_forward = UnitSettings::Reshard{true, 0};
  every_unit.modules_to_forward_prefetch = std::vector<std::string>{};
  every_unit.modules_to_backward_prefetch = std::vector<std::string>{};
  EXPECT_EQ(fsdp2->every_unit, every_unit);
  ASSERT_EQ(fsdp2->units.size(), 3u);
  EXPECT_EQ(fsdp2->units[0].first, "blocks.0");
  EXPECT_EQ(fsdp2->units[0].second.modules_to_forward_prefetch,
            (std::vector<std::string>{"blocks.2", "blocks.1"}));
  EXPECT_FALSE(fsdp2->units[0].second.reshard_after_forward);
  EXPECT_EQ(fsdp2->units[1].second.reshard_after_forward, (UnitSettings::Reshard{true, 2}));
  EXPECT_EQ(fsdp2->units[2].second.reshard_after_forward, (UnitSettings::Reshard{false, 0}));
  EXPECT_EQ(fsdp2->units[2].second.modules_to_backward_prefetch,
            std::vector<std::string>{"blocks.0"});
  EXPECT_EQ(fsdp2->notes, std::vector<std::string>{
                              "unit blocks.1 was wrapped with {\"mp_policy\":{\"param_dtype\":"
                              "\"bfloat16\"}}: the first unit's are emitted for it"});

  Result<ProgramFsdpFlags> fsdp1 = FsdpFlagsOf(R"({"implementation": "fsdp1", "settings": {
      "backward_prefetch": "BACKWARD_PRE"}, "instances": {"b": {"backward_prefetch": null}}})");
  ASSERT_TRUE(fsdp1.ok()) << fsdp1.status().ToString();
  EXPECT_EQ(fsdp1->every_unit.backward_prefetch, BackwardPrefetch::kPre);
  ASSERT_EQ(fsdp1->units.size(), 1u);
  EXPECT_EQ(fsdp1->units[0].second.backward_prefetch, BackwardPrefetch::kNone);

  const auto error = [](const std::string& json) {
    Result<ProgramFsdpFlags> flags = FsdpFlagsOf(json);
    return flags.ok() ? std::string() : flags.status().message();
  };
  EXPECT_EQ(error(R"({"implementation": "fsdp2", "settings": {},
                     "instances": {"b": {"modules_to_forward_prefetch": "c"}}})"),
            "the program's fsdp instances.b.modules_to_forward_prefetch is \"c\": expected a "
            "list of unit names");
  EXPECT_EQ(error(R"({"implementation": "fsdp2", "settings": {"reshard_after_forward": 0}})"),
            "the program's fsdp settings.reshard_after_forward is 0: expected true, false or a "
            "positive int");
  EXPECT_EQ(error(R"({"implementation": "fsdp1", "settings": {"backward_prefetch": "PRE"}})"),
            "the program's fsdp settings.backward_prefetch is \"PRE\": expected "
            "\"BACKWARD_PRE\", \"BACKWARD_POST\" or null");
  EXPECT_EQ(error(R"({"implementation": "fsdp1", "settings": {}, "instances": {"b": 1}})"),
            "the program's fsdp instances.b is 1: expected an object of settings");
}

std::string ErrorOf(const std::string& text) {
  Result<ModelProgram> model = ParseProgram("m.json", text);
  EXPECT_FALSE(model.ok());
  return model.ok() ? "" : model.status().message();
}

constexpr const char* kHead =
    R"("format": "bucketsim-program", "schema_version": 1, "instances": [{"name": "r", "params": []}])";

// A program's bf16 recording (low_precision): read with its own recording keys under its
// pointer, sharing the instances; written back and read again the same; a wrong dtype, an
// unknown key and a bad op in it are errors that point into it.
TEST(ProgramFile, LowPrecisionRecordingIsReadWrittenAndChecked) {
  const std::string fp32 =
      R"("inputs": [{"id": "x", "bytes": 64, "dtype": "fp32"}], "forward": [{"op": "run",
      "name": "f", "inputs": ["x"], "outputs": [{"id": "l", "bytes": 64, "dtype": "fp32"}]}],
      "loss": "l")";
  const std::string low =
      R"("low_precision": {"dtype": "bf16", "inputs": [{"id": "x", "bytes": 32, "dtype":
      "bf16"}], "forward": [{"op": "run", "name": "f", "inputs": ["x"], "outputs": [{"id": "c",
      "bytes": 64, "dtype": "fp32"}, {"id": "l", "bytes": 64, "dtype": "fp32"}]}], "loss": "l"})";
  Result<ModelProgram> read =
      ParseProgram("m.json", std::string("{") + kHead + ", " + fp32 + ", " + low + "}");
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_NE(read->low_precision, nullptr);
  EXPECT_EQ(read->forward.front().outputs.size(), 1u);
  EXPECT_EQ(read->low_precision->forward.front().outputs.size(), 2u);
  EXPECT_EQ(read->low_precision->inputs.front().dtype, "bf16");
  EXPECT_EQ(read->low_precision->units.size(), read->units.size());
  const std::string written = ProgramText(*read);
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
  ASSERT_NE(again->low_precision, nullptr);

  std::string wrong = low;
  wrong.replace(wrong.find("\"bf16\", \"inputs\""), 6, "\"fp16\"");
  EXPECT_EQ(ErrorOf(std::string("{") + kHead + ", " + fp32 + ", " + wrong + "}"),
            "m.json: /low_precision/dtype: expected \"bf16\" (the recorder records the bf16 "
            "run), got \"fp16\"");
  std::string bad_op = low;
  bad_op.replace(bad_op.find("\"op\": \"run\""), 11, "\"op\": \"fly\"");
  const std::string error = ErrorOf(std::string("{") + kHead + ", " + fp32 + ", " + bad_op + "}");
  EXPECT_EQ(error.rfind("m.json: /low_precision/forward/0/op: ", 0), 0u) << error;
}

// --activation-dtype param-dtype on a program with a bf16 recording emits that recording (its
// fp32 output, the model's own, kept), not a cast of the fp32 one; without the flag, or at
// fp32, the fp32 recording stays; at fp16 its bf16 tensors are fp16.
TEST(ProgramFile, ParamDtypeActivationsEmitTheLowPrecisionRecording) {
  const std::string text =
      std::string("{") + kHead +
      R"(, "inputs": [{"id": "x", "bytes": 64, "dtype": "fp32"}], "forward": [{"op": "run",
      "name": "f", "inputs": ["x"], "outputs": [{"id": "l", "bytes": 64, "dtype": "fp32"}]}],
      "loss": "l", "low_precision": {"dtype": "bf16", "inputs": [{"id": "x", "bytes": 32,
      "dtype": "bf16"}], "forward": [{"op": "run", "name": "f", "inputs": ["x"], "outputs":
      [{"id": "c", "bytes": 64, "dtype": "fp32"}, {"id": "l", "bytes": 32, "dtype": "bf16"}]}],
      "loss": "l"}})";
  const auto emitted = [&](DType compute, const std::string& activations) {
    Result<ModelProgram> program = ParseProgram("m.json", text);
    EXPECT_TRUE(program.ok()) << program.status().ToString();
    GenOptions options;
    options.compute_dtype = compute;
    ProgramWhatIfs what_ifs;
    what_ifs.activation_dtype = activations;
    Result<WhatIfChanges> changes = ApplyWhatIfs(*program, options, what_ifs);
    EXPECT_TRUE(changes.ok()) << changes.status().ToString();
    return std::make_pair(std::move(*program), std::move(*changes));
  };
  auto [low, changes] = emitted(DType::kBFloat16, "param-dtype");
  ASSERT_EQ(low.forward.front().outputs.size(), 2u);
  EXPECT_EQ(low.forward.front().outputs[0].dtype, "fp32");
  EXPECT_EQ(low.forward.front().outputs[1].dtype, "bf16");
  EXPECT_FALSE(changes.cast);
  ASSERT_TRUE(changes.low_precision);
  EXPECT_EQ(changes.low_precision->fp32, 1u);
  EXPECT_NE(low.description.find("emitted from its bf16 recording"), std::string::npos);
  auto [fp16, fp16_changes] = emitted(DType::kFloat16, "param-dtype");
  EXPECT_EQ(fp16.inputs.front().dtype, "fp16");
  EXPECT_EQ(fp16.forward.front().outputs[1].dtype, "fp16");
  EXPECT_EQ(fp16.forward.front().outputs[0].dtype, "fp32");
  auto [recorded, recorded_changes] = emitted(DType::kBFloat16, "recorded");
  EXPECT_EQ(recorded.forward.front().outputs.size(), 1u);
  EXPECT_FALSE(recorded_changes.low_precision);
  auto [fp32, fp32_changes] = emitted(DType::kFloat32, "param-dtype");
  EXPECT_EQ(fp32.forward.front().outputs.size(), 1u);
}

TEST(ProgramFile, ReaderErrorsNameFileAndPointer) {
  EXPECT_EQ(ErrorOf(R"({"schema_version": 3, "world_size": 2, "rank": 0, "events": []})"),
            "m.json: this is a trace, not a model program (a model program comes from bucketsim "
            "gen PRESET --emit-program, or tools/record_program.py)");
  EXPECT_EQ(ErrorOf(R"({"format": "x", "schema_version": 1})"),
            "m.json: /format: expected \"bucketsim-program\", got \"x\"");
  EXPECT_EQ(ErrorOf(std::string("{") + kHead + R"(, "forward": [], "loss": "l", "extra": 1})"),
            "m.json: /extra: unknown key (known here: format, schema_version, description, "
            "autocast, instances, inputs, forward, loss, held, fsdp, optimizer, measured, "
            "modules, batch, seq, target, low_precision)");
  EXPECT_EQ(ErrorOf(std::string("{") + kHead +
                    R"(, "forward": [{"op": "gather", "instance": "q"}], "loss": "l"})"),
            "m.json: /forward/0/instance: no instance is named 'q'");
  EXPECT_EQ(ErrorOf(std::string("{") + kHead + R"(, "forward": [{"op": "jump"}], "loss": "l"})"),
            "m.json: /forward/0/op: unknown op 'jump' (expected gather, end_forward, run, "
            "checkpoint_begin or checkpoint_end)");
  EXPECT_EQ(
      ErrorOf(
          std::string("{") + kHead +
          R"(, "forward": [{"op": "run", "name": "a", "outputs": [{"id": "t", "bytes": -1, "dtype": "fp32"}]}], "loss": "t"})"),
      "m.json: /forward/0/outputs/0/bytes: expected an integer >= 0, got -1");
  EXPECT_EQ(
      ErrorOf(
          std::string("{") + kHead +
          R"(, "forward": [{"op": "run", "name": "a", "inputs": [{"tensor": "t", "grad": "maybe"}]}], "loss": "t"})"),
      "m.json: /forward/0/inputs/0/grad: expected \"new\", \"pass\" or \"none\", got \"maybe\"");
  // References are checked after the structure, with the same pointers.
  EXPECT_EQ(ErrorOf(std::string("{") + kHead +
                    R"(, "forward": [{"op": "run", "name": "a", "inputs": ["t"]}], "loss": "t"})"),
            "m.json: /forward/0/inputs/0: tensor 't' is not defined by an earlier run or input");
  EXPECT_EQ(ErrorOf(std::string("{") + kHead +
                    R"(, "forward": [{"op": "checkpoint_begin"}], "loss": "t"})"),
            "m.json: /forward/0: checkpoint_begin has no checkpoint_end");
  EXPECT_EQ(ErrorOf(R"({"format": "bucketsim-program", "schema_version": 2})"),
            ErrorOf(R"({"format": "bucketsim-program", "schema_version": 2})"));
  EXPECT_NE(ErrorOf(R"({"format": "bucketsim-program", "schema_version": 2})").find("m.json: "),
            std::string::npos);
}

// Module calls (the recorder's "modules"): ranges of the forward's ops, nested, each holding both
// or neither op of an instance's gather/end_forward pair; written back as read.
constexpr const char* kCallsProgram = R"({
  "format": "bucketsim-program", "schema_version": 1,
  "instances": [{"name": "root", "params": []}, {"name": "b", "params": [{"name": "w", "numel": 4}]}],
  "inputs": [{"id": "x", "bytes": 16, "dtype": "fp32"}],
  "forward": [
    {"op": "gather", "instance": "b"},
    {"op": "run", "name": "b.lin:mm", "uses": ["b"], "param_reads": ["w"], "inputs": ["x"],
     "outputs": [{"id": "h", "bytes": 16, "dtype": "fp32"}], "saves": [{"tensor": "x"}]},
    {"op": "run", "name": "b:relu", "inputs": ["h"],
     "outputs": [{"id": "y", "bytes": 16, "dtype": "fp32"}], "saves": [{"tensor": "y"}]},
    {"op": "end_forward", "instance": "b"},
    {"op": "run", "name": "root:sum", "inputs": ["y"],
     "outputs": [{"id": "l", "bytes": 4, "dtype": "fp32", "shape": []}]}
  ],
  "loss": "l",
  "modules": [CALLS]
})";

std::string WithCalls(const std::string& calls) {
  std::string text = kCallsProgram;
  return text.replace(text.find("CALLS"), 5, calls);
}

// Selective checkpointing's keys: a run's "policy" and a non-reentrant region's "early_stop",
// read, written back the same and checked (a saved run only in a non-reentrant region, early
// stop only of one).
TEST(ProgramFile, SelectiveCheckpointingKeysRoundTripAndAreChecked) {
  const auto program = [](const std::string& begin, const std::string& policy) {
    return std::string("{") + kHead +
           R"(, "inputs": [{"id": "x", "bytes": 64, "dtype": "fp32"}], "forward": [)" + begin +
           R"(, {"op": "run", "name": "b:mm", "inputs": ["x"], "outputs": [{"id": "y",
           "bytes": 64, "dtype": "fp32"}], "saves": [{"tensor": "x"}])" +
           policy + R"(}, {"op": "checkpoint_end"}], "loss": "y"})";
  };
  const std::string begin =
      R"({"op": "checkpoint_begin", "saves": [{"tensor": "x"}], "reentrant": false,
      "early_stop": false})";
  Result<ModelProgram> model = ParseProgram("m.json", program(begin, R"(, "policy": "save")"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_FALSE(model->forward[0].early_stop);
  EXPECT_TRUE(model->forward[1].policy_saved);
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find("\"policy\":\"save\""), std::string::npos) << written;
  EXPECT_NE(written.find("\"early_stop\":false"), std::string::npos) << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
  EXPECT_TRUE(ParseProgram("m.json", program(begin, R"(, "policy": "recompute")")).ok());
  EXPECT_EQ(ErrorOf(program(begin, R"(, "policy": "keep")")),
            "m.json: /forward/1/policy: expected \"save\" or \"recompute\", got \"keep\"");
  const std::string reentrant = R"({"op": "checkpoint_begin", "saves": [{"tensor": "x"}]})";
  EXPECT_EQ(ErrorOf(program(reentrant, R"(, "policy": "save")")),
            "m.json: /forward/1/policy: \"save\" is selective checkpointing's decision, made "
            "only inside a non-reentrant checkpointed region (\"reentrant\": false)");
  EXPECT_EQ(ErrorOf(program(R"({"op": "checkpoint_begin", "saves": [{"tensor": "x"}],
      "early_stop": false})",
                            "")),
            "m.json: /forward/0/early_stop: a reentrant region reruns its whole forward; "
            "early_stop is a setting of non-reentrant ones (\"reentrant\": false)");
}

TEST(ProgramFile, ModuleCallsRoundTrip) {
  Result<ModelProgram> model =
      ParseProgram("m.json", WithCalls(R"({"name": "b", "class": "Block", "ops": [1, 3]},
                             {"name": "b.lin", "class": "Linear", "ops": [1, 2]})"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_EQ(model->module_calls.size(), 2u);
  EXPECT_EQ(model->module_calls[0].name, "b");
  EXPECT_EQ(model->module_calls[0].type, "Block");
  EXPECT_EQ(model->module_calls[0].begin, 1u);
  EXPECT_EQ(model->module_calls[0].end, 3u);
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find("\"modules\": [\n    {\"name\":\"b\",\"class\":\"Block\",\"ops\":[1,3]},"),
            std::string::npos)
      << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
}

TEST(ProgramFile, ModuleCallErrors) {
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "b", "class": "Block", "ops": [1]})")),
            "m.json: /modules/0/ops: expected [BEGIN, END] (2 op indexes), got 1 element(s)");
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "", "class": "Block", "ops": [1, 3]})")),
            "m.json: /modules/0/name: must not be empty");
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "b", "ops": [1, 3]})")),
            "m.json: /modules/0/class: missing (the model program needs a string here)");
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "b", "class": "Block", "ops": [1, 3], "args": []})")),
            "m.json: /modules/0/args: unknown key (known here: name, class, ops)");
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "b", "class": "Block", "ops": [3, 9]})")),
            "m.json: /modules/0/ops: [3, 9] is not a range of the forward's 5 ops (BEGIN <= END <= "
            "5)");
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "b", "class": "Block", "ops": [1, 3]},
                                 {"name": "c", "class": "C", "ops": [2, 5]})")),
            "m.json: /modules/1/ops: the call of 'c' [2, 5] overlaps the call of 'b' [1, 3] "
            "(/modules/0) without lying inside it: calls nest");
  EXPECT_EQ(ErrorOf(WithCalls(R"({"name": "b", "class": "Block", "ops": [0, 3]})")),
            "m.json: /modules/0/ops: the call of 'b' [0, 3] holds one of instance 'b''s gather "
            "(/forward/0) and end_forward (/forward/3) but not the other");
}

// A program recorded at several batch sizes: the "batch" key and each tensor's and run's
// per-sample parts, written back as read; per-sample parts need the key.
constexpr const char* kBatchProgram = R"({
  "format": "bucketsim-program", "schema_version": 1,
  "instances": [{"name": "root", "params": [{"name": "w", "numel": 4}]}],
  "inputs": [{"id": "x", "bytes": 32, "bytes_per_sample": 16, "dtype": "fp32"}],
  "forward": [
    {"op": "gather", "instance": "root"},
    {"op": "run", "name": "mm", "flops": 100, "flops_per_sample": 50, "backward_flops": 300,
     "backward_flops_per_sample": 100, "uses": ["root"], "inputs": ["x"],
     "outputs": [{"id": "y", "bytes": 64, "bytes_per_sample": 32, "dtype": "fp32"}],
     "saves": [{"bytes": 8, "bytes_per_sample": 4, "dtype": "bool"}],
     "workspace": [{"bytes": 2, "bytes_per_sample": 1, "dtype": "bf16"}]},
    {"op": "end_forward", "instance": "root"}
  ],
  "loss": "y"BATCH
})";

std::string WithBatch(const std::string& batch) {
  std::string text = kBatchProgram;
  return text.replace(text.find("BATCH"), 5, batch);
}

TEST(ProgramFile, BatchSizesRoundTrip) {
  Result<ModelProgram> model =
      ParseProgram("m.json", WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3, 4]})"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(model->batch);
  EXPECT_EQ(model->batch->at, 2u);
  EXPECT_EQ(model->batch->checked, (std::vector<std::uint64_t>{2, 3, 4}));
  EXPECT_EQ(model->inputs[0].bytes_growth[0], 16);
  EXPECT_EQ(model->forward[1].flops_growth[0], 50);
  ASSERT_TRUE(model->forward[1].backward_flops_growth);
  EXPECT_EQ((*model->forward[1].backward_flops_growth)[0], 100);
  EXPECT_EQ(model->forward[1].outputs[0].bytes_growth[0], 32);
  EXPECT_EQ(model->forward[1].saves[0].fresh.bytes_growth[0], 4);
  EXPECT_EQ(model->forward[1].workspace[0].bytes_growth[0], 1);
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find("\"batch\": {\"size\":2,\"checked\":[2,3,4]}"), std::string::npos)
      << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
}

TEST(ProgramFile, BatchSizesErrors) {
  EXPECT_EQ(ErrorOf(WithBatch("")),
            "m.json: /inputs/0/bytes_per_sample: a program recorded at one batch size has no "
            "per-sample sizes (the \"batch\" key says at which sizes they were fitted)");
  EXPECT_EQ(ErrorOf(WithBatch(R"(, "batch": {"size": 2, "checked": [2, 2, 4]})")),
            "m.json: /batch/checked/1: batch sizes are at least 1, in ascending order");
  EXPECT_EQ(ErrorOf(WithBatch(R"(, "batch": {"size": 5, "checked": [2, 3, 4]})")),
            "m.json: /batch/size: 5 is not among the checked batch sizes");
  EXPECT_EQ(ErrorOf(WithBatch(R"(, "batch": {"size": 2, "checked": [0, 2]})")),
            "m.json: /batch/checked/0: batch sizes are at least 1, in ascending order");
  std::string negative = WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3]})");
  const std::string fifty = "\"flops_per_sample\": 50";
  negative.replace(negative.find(fifty), fifty.size(), "\"flops_per_sample\": -5");
  EXPECT_EQ(ErrorOf(negative),
            "m.json: /forward/1: flops, backward_flops and their growth with the batch (per "
            "sample, per token) must be finite and not negative");
}

// A program recorded at several sequence lengths too: the "seq" key and the per-token terms,
// written back as read; per-token terms need the key, cross terms both keys.
TEST(ProgramFile, SequenceLengthsRoundTrip) {
  std::string text = WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3, 4]},
                   "seq": {"length": 16, "checked": [16, 24, 32, 40]})");
  const std::string y = R"("bytes_per_sample": 32,)";
  text.replace(text.find(y), y.size(),
               R"("bytes_per_sample": 32, "bytes_per_token": 4, "bytes_per_token2": 1,
                  "bytes_per_sample_token": 2, "bytes_per_sample_token2": 3,)");
  const std::string fifty = R"("flops_per_sample": 50,)";
  text.replace(text.find(fifty), fifty.size(), R"("flops_per_sample": 50, "flops_per_token2": 7,)");
  Result<ModelProgram> model = ParseProgram("m.json", text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(model->seq);
  EXPECT_EQ(model->seq->at, 16u);
  EXPECT_EQ(model->seq->checked, (std::vector<std::uint64_t>{16, 24, 32, 40}));
  EXPECT_EQ(model->forward[1].outputs[0].bytes_growth, (Growth<std::int64_t>{32, 4, 1, 2, 3}));
  EXPECT_EQ(model->forward[1].flops_growth, (Growth<double>{50, 0, 7, 0, 0}));
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find("\"seq\": {\"length\":16,\"checked\":[16,24,32,40]}"), std::string::npos)
      << written;
  // The explicit backward growth keeps every term the program's dimensions have, zeros too.
  EXPECT_NE(written.find("\"backward_flops_per_sample_token2\":0.0"), std::string::npos) << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);

  std::string no_seq = WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3, 4]})");
  no_seq.replace(no_seq.find(y), y.size(), R"("bytes_per_sample_token": 2,)");
  EXPECT_EQ(ErrorOf(no_seq),
            "m.json: /forward/1/outputs/0/bytes_per_sample_token: a program recorded at one "
            "sequence length has no per-token sizes (the \"seq\" key says at which lengths they "
            "were fitted)");
  EXPECT_EQ(ErrorOf(WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3]},
                                 "seq": {"length": 9, "checked": [8, 16]})")),
            "m.json: /seq/length: 9 is not among the checked sequence lengths");
  EXPECT_EQ(ErrorOf(WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3]},
                                 "seq": {"length": 8, "checked": [16, 8]})")),
            "m.json: /seq/checked/1: sequence lengths are at least 1, in ascending order");
  std::string huge = WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3]})");
  huge.replace(huge.find(y), y.size(), R"("bytes_per_sample": 1125899906842625,)");
  EXPECT_EQ(ErrorOf(huge), "m.json: /forward/1/outputs/0/bytes_per_sample: more than 1 PiB");
  std::string unknown = WithBatch(R"(, "batch": {"size": 2, "checked": [2, 3]})");
  unknown.replace(unknown.find(y), y.size(), R"("bytes_per_batch": 1,)");
  EXPECT_EQ(ErrorOf(unknown),
            "m.json: /forward/1/outputs/0/bytes_per_batch: unknown key (known here: id, bytes, "
            "dtype, shape, name, requires_grad, alias, bytes_per_...)");
}

// A parameter's size in dim 0 (FSDP2 shards along it): on a parameter of its own or on a flat
// parameter's views, written back as read; at least 1, dividing the numel, never on the flat
// parameter itself.
TEST(ProgramFile, Dim0RoundTripsAndIsChecked) {
  const auto with_params = [](const std::string& params) {
    return std::string("{") +
           R"("format": "bucketsim-program", "schema_version": 1,
              "instances": [{"name": "root", "params": )" +
           params + R"(}], "forward": [{"op": "gather", "instance": "root"},
              {"op": "run", "name": "r", "uses": ["root"], "outputs": [{"id": "y",
              "bytes": 4, "dtype": "fp32"}]}], "loss": "y"})";
  };
  Result<ModelProgram> model =
      ParseProgram("m.json", with_params(R"([{"name": "pos", "numel": 6, "dim0": 1},
                                {"name": "flat_param_0", "numel": 10, "views": [
                                  {"name": "w", "numel": 8, "dim0": 4}, {"name": "b", "numel": 2}]}])"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->units[0].params[0].dim0, 1u);
  EXPECT_EQ(model->units[0].params[1].views[0].dim0, 4u);
  EXPECT_EQ(model->units[0].params[1].views[1].dim0, 0u);
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find(R"({"name":"pos","numel":6,"dim0":1})"), std::string::npos) << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(ProgramText(*again), written);
  EXPECT_EQ(ErrorOf(with_params(R"([{"name": "w", "numel": 6, "dim0": 4}])")),
            "m.json: /instances/0/params/0/dim0: 4 is not a size in dim 0 of a parameter of 6 "
            "elements (at least 1, dividing it)");
  EXPECT_EQ(ErrorOf(with_params(R"([{"name": "flat_param_0", "numel": 2, "dim0": 1,
                                     "views": [{"name": "b", "numel": 2}]}])")),
            "m.json: /instances/0/params/0/dim0: a flat parameter has no dim 0 of its own: give "
            "each view its own");
}

TEST(ProgramFile, FsdpSettingsErrors) {
  const std::string head = std::string("{") + kHead +
                           R"(, "forward": [{"op": "run", "name": "r", "outputs": [{"id": "y",
                              "bytes": 4, "dtype": "fp32"}]}], "loss": "y", )";
  EXPECT_EQ(ErrorOf(head + R"("fsdp": {"implementation": "ddp", "settings": {}}})"),
            "m.json: /fsdp/implementation: expected \"fsdp1\" or \"fsdp2\", got \"ddp\"");
  EXPECT_EQ(ErrorOf(head + R"("fsdp": {"implementation": "fsdp1", "settings": {},
                                        "instances": {"blocks.9": {}}}})"),
            "m.json: /fsdp/instances/blocks.9: no instance has this name");
}

// The optimizer the recorder was told: checked, written back unchanged, and said as gen flags.
TEST(ProgramFile, OptimizerKeyRoundTripsAndIsSaidAsFlags) {
  const std::string text = std::string("{") + kHead +
                           R"(, "forward": [{"op": "run", "name": "r", "outputs": [{"id": "y",
                              "bytes": 4, "dtype": "fp32"}]}], "loss": "y",
                              "optimizer": {"name": "adamw", "impl": "fused",
                                            "weight_decay": 0.1}})";
  Result<ModelProgram> model = ParseProgram("m.json", text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(model->optimizer);
  const std::string written = ProgramText(*model);
  EXPECT_NE(written.find(R"("optimizer": {"name":"adamw","impl":"fused","weight_decay":0.1})"),
            std::string::npos)
      << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
  using Flags = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(OptimizerFlagsOf(*model->optimizer),
            (Flags{{"optimizer", "adamw"}, {"optimizer-impl", "fused"}, {"weight-decay", "0.1"}}));
  EXPECT_EQ(OptimizerFlagsOf(R"({"name": "sgd"})"), (Flags{{"optimizer", "sgd"}}));
}

TEST(ProgramFile, OptimizerKeyErrors) {
  const std::string head = std::string("{") + kHead +
                           R"(, "forward": [{"op": "run", "name": "r", "outputs": [{"id": "y",
                              "bytes": 4, "dtype": "fp32"}]}], "loss": "y", )";
  EXPECT_EQ(ErrorOf(head + R"("optimizer": {"name": "lion"}})"),
            "m.json: /optimizer/name: expected sgd, sgd-momentum, adam or adamw, got \"lion\"");
  EXPECT_EQ(ErrorOf(head + R"("optimizer": {"name": "adam", "impl": "loop"}})"),
            "m.json: /optimizer/impl: expected for-loop, foreach or fused, got \"loop\"");
  EXPECT_EQ(ErrorOf(head + R"("optimizer": {"name": "adam", "weight_decay": -1}})"),
            "m.json: /optimizer/weight_decay: must be >= 0");
  EXPECT_EQ(ErrorOf(head + R"("optimizer": {"impl": "fused"}})").find("/optimizer/name"),
            std::string("m.json: ").size());
  EXPECT_EQ(ErrorOf(head + R"("optimizer": {"name": "sgd", "lr": 0.1}})"),
            "m.json: /optimizer/lr: unknown key (known here: name, impl, weight_decay)");
}

// The device a recorder recorded for (its "target" key): checked, kept, written back unchanged.
TEST(ProgramFile, TargetKeyRoundTripsAndIsChecked) {
  const std::string head = std::string("{") + kHead +
                           R"(, "forward": [{"op": "run", "name": "r", "outputs": [{"id": "y",
                              "bytes": 4, "dtype": "fp32"}]}], "loss": "y", )";
  Result<ModelProgram> model = ParseProgram(
      "m.json", head + R"("target": {"device": "cuda", "gpu": "sm90", "attention": {"flash": 32},
                         "unmodelled": ["x: y"]}})");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ASSERT_TRUE(model->target);
  EXPECT_EQ(model->target->device, "cuda");
  EXPECT_EQ(model->target->gpu, "sm90");
  using Counts = std::vector<std::pair<std::string, std::uint64_t>>;
  EXPECT_EQ(model->target->attention, (Counts{{"flash", 32}}));
  EXPECT_EQ(model->target->unmodelled, std::vector<std::string>{"x: y"});
  const std::string written = ProgramText(*model);
  EXPECT_NE(
      written.find(
          R"("target": {"device":"cuda","gpu":"sm90","attention":{"flash":32},"unmodelled":["x: y"]})"),
      std::string::npos)
      << written;
  Result<ModelProgram> again = ParseProgram("m.json", written);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ProgramText(*again), written);
  EXPECT_EQ(ErrorOf(head + R"("target": {"device": "tpu"}})"),
            "m.json: /target/device: expected \"cuda\" or \"cpu\", got \"tpu\"");
  EXPECT_EQ(ErrorOf(head + R"("target": {"device": "cpu", "sdpa": "flash"}})"),
            "m.json: /target/sdpa: unknown key (known here: device, gpu, attention, unmodelled, "
            "fp32_upcasts)");
  EXPECT_EQ(ErrorOf(head + R"("target": {"device": "cuda", "attention": {"flash": -1}}})"),
            "m.json: /target/attention/flash: expected an integer >= 0, got -1");
  // The model's own casts to fp32 that an fp32 recording makes no-ops.
  Result<ModelProgram> upcasts =
      ParseProgram("m.json", head + R"("target": {"device": "cuda", "fp32_upcasts": {"calls": 130,
                           "modules": ["RMSNorm", "Transformer"]}}})");
  ASSERT_TRUE(upcasts.ok()) << upcasts.status().ToString();
  EXPECT_EQ(upcasts->target->fp32_upcasts, 130u);
  EXPECT_EQ(upcasts->target->fp32_upcast_modules,
            (std::vector<std::string>{"RMSNorm", "Transformer"}));
  EXPECT_EQ(ErrorOf(head + R"("target": {"device": "cuda", "fp32_upcasts": {"calls": -1}}})"),
            "m.json: /target/fp32_upcasts/calls: expected an integer >= 0, got -1");
  EXPECT_EQ(ErrorOf(head + R"("target": {"device": "cuda", "fp32_upcasts": {"n": 1}}})"),
            "m.json: /target/fp32_upcasts/n: unknown key (known here: calls, modules)");
}

// Complex tensors (a rotary embedding's view_as_complex) are bytes by element size, and their
// gradients are made like a floating-point tensor's.
TEST(ProgramFile, ComplexTensorsAreReadByElementSize) {
  const std::string text = std::string("{") + kHead +
                           R"(, "inputs": [{"id": "f", "bytes": 64, "dtype": "complex64",
                                            "shape": [8]}],
                              "forward": [{"op": "run", "name": "r", "inputs": ["f"],
                                "outputs": [{"id": "y", "bytes": 128, "dtype": "complex128",
                                             "shape": [8]},
                                            {"id": "h", "bytes": 32, "dtype": "complex32",
                                             "shape": [8]}]}], "loss": "y"})";
  Result<ModelProgram> model = ParseProgram("m.json", text);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(ProgramDTypeSize("complex64"), 8u);
  EXPECT_EQ(ProgramDTypeSize("torch.complex128"), 16u);
  EXPECT_EQ(ProgramDTypeSize("complex32"), 4u);
  EXPECT_FALSE(IsFloatingDType("complex64"));
}

// A view or in-place result whose run does not read the tensor it aliases: the fuzzer's
// finding (convnet-unflat-ckpt.json with blocks.10's input renamed from blocks.9.out to
// blocks.8.out, which aborted the emitter at FsdpTrace::Acquire) is refused with its pointer.
TEST(ProgramFile, AnAliasOfATensorTheRunDoesNotReadIsRefused) {
  const std::string forward = R"(, "forward": [
      {"op": "run", "name": "a", "outputs": [{"id": "a", "bytes": 4, "dtype": "fp32"}]},
      {"op": "run", "name": "b", "inputs": ["a"], "outputs": [{"id": "b", "bytes": 4, "dtype": "fp32"}]},
      {"op": "run", "name": "c", "inputs": ["b"],
       "outputs": [{"id": "c", "bytes": 4, "dtype": "fp32", "alias": "a"}]}], "loss": "c"})";
  EXPECT_EQ(ErrorOf(std::string("{") + kHead + forward),
            "m.json: /forward/2/outputs/0/alias: 'a' is not read by this run (no input shares "
            "its storage): a view or in-place result shares the storage of one of its run's "
            "inputs");
  // Reading a view of it is reading its storage: accepted.
  const std::string through_view = R"(, "forward": [
      {"op": "run", "name": "a", "outputs": [{"id": "a", "bytes": 4, "dtype": "fp32"}]},
      {"op": "run", "name": "v", "inputs": ["a"], "outputs": [{"id": "v", "bytes": 4, "dtype": "fp32", "alias": "a"}]},
      {"op": "run", "name": "c", "inputs": ["v"],
       "outputs": [{"id": "c", "bytes": 4, "dtype": "fp32", "alias": "a"}]}], "loss": "c"})";
  Result<ModelProgram> accepted = ParseProgram("m.json", std::string("{") + kHead + through_view);
  EXPECT_TRUE(accepted.ok()) << accepted.status().ToString();
}

TEST(ProgramFile, MissingFileIsAnIoError) {
  Result<ModelProgram> model = ReadProgramFile("/nonexistent/m.json");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace bucketsim
