// `bucketsim gen` through the real binary: --list prints every preset's parameter table, bad
// values are usage errors (exit 2, one message naming the flag), a generated trace carries its
// bucket_cap_mb to compare, and `gen program` on a preset's --emit-program writes the preset's
// trace byte for byte.
#include <algorithm>

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gen/preset.h"
#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;

TEST(GenCommand, ListPrintsEveryPresetsParametersAndDefaults) {
  testing::BinaryResult run = RunBucketsim({"gen", "--list"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Every entry of every preset's table, with its default and its meaning.
  for (const std::unique_ptr<Preset>& preset : MakePresets()) {
    EXPECT_NE(run.out.find(fmt::format("{}: {}\n", preset->name(), preset->summary())),
              std::string::npos)
        << preset->name();
    for (const PresetParam& param : preset->Params()) {
      EXPECT_NE(run.out.find("--" + param.name), std::string::npos) << param.name;
      EXPECT_NE(run.out.find(param.meaning), std::string::npos) << param.name;
    }
  }
  EXPECT_NE(run.out.find("--kv-heads INT"), std::string::npos);
  EXPECT_NE(run.out.find("--groups shared|per-instance|shared-bn-own|hsdp"), std::string::npos);
  EXPECT_NE(run.out.find("--autocast none|fp16|bf16"), std::string::npos);
  EXPECT_NE(run.out.find("program MODEL.json: "), std::string::npos);
  // The convnet's defaults are fairscale's test, not the transformer's.
  const std::size_t convnet = run.out.find("fairscale-convnet:");
  ASSERT_NE(convnet, std::string::npos);
  EXPECT_NE(run.out.find("default 2 ", run.out.find("--world-size INT", convnet)),
            std::string::npos);
  EXPECT_NE(run.out.find("default sgd-momentum", convnet), std::string::npos);
}

TEST(GenCommand, BadValuesAreUsageErrors) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"gen", "transformer", "--layers", "abc"}, "--layers: 'abc' is not an integer"},
      {{"gen", "transformer", "--groups", "per-group"},
       "--groups: 'per-group' is not one of shared, per-instance, shared-bn-own or hsdp"},
      {{"gen", "transformer", "--param-dtype", "fp64"},
       "--param-dtype: 'fp64' is not one of fp32, bf16 or fp16"},
      {{"gen", "transformer", "--bucket-cap-mb", "nan"}, "--bucket-cap-mb: 'nan' is not a finite"},
      {{"gen", "transformer", "--reshard-after-forward=maybe"},
       "--reshard-after-forward: 'maybe' is not a boolean"},
      {{"gen", "transformer", "--heads", "5"}, "heads (5) must divide hidden (1024)"},
      {{"gen", "transformer", "--kv-heads", "3"}, "kv_heads (3) must divide heads (16)"},
      {{"gen", "transformer", "--world-size", "0"}, "world_size must be at least 1"},
      {{"gen", "transformer", "--autocast", "fp32"}, "--autocast: 'fp32' is not one of none"},
      {{"gen", "transformer", "--groups", "hsdp"}, "hsdp_shard_size must be at least 2"},
      {{"gen", "transformer", "--hsdp-shard-size", "2"}, "only meaningful with the hsdp"},
      {{"gen", "transformer", "--fp32-reduce-scatter", "--reduce-dtype", "bf16"},
       "fp32_reduce_scatter reduces in fp32, but reduce_dtype is bf16"},
      {{"gen", "fairscale-convnet", "--hidden-dim", "0"}, "hidden_dim must be at least 1"},
      {{"gen", "fairscale-convnet", "--image-size", "2"}, "image_size must be at least 3"},
      {{"gen"}, "gen needs a preset (transformer, fairscale-convnet), program or --list"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = c.args;
    if (args.size() > 1) args.insert(args.end(), {"-o", "/dev/null"});
    testing::BinaryResult run = RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 2) << c.message;
    EXPECT_NE(run.err.find(c.message), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty()) << c.message;
  }
}

// The generator records --bucket-cap-mb in the header; compare uses it unless told otherwise.
TEST(GenCommand, GeneratedCapIsTheRunsDefault) {
  const std::string trace = testing::WriteTempFile("gen-cap.json", "");
  testing::BinaryResult gen =
      RunBucketsim({"gen", "fairscale-convnet", "--hidden-dim", "4", "--image-size", "8",
                    "--iterations", "1", "--bucket-cap-mb", "0.5", "-o", trace});
  ASSERT_EQ(gen.exit_code, 0) << gen.err;
  EXPECT_EQ(RunBucketsim({"validate", trace}).exit_code, 0);

  testing::BinaryResult from_header =
      RunBucketsim({"compare", trace, "--policy", "backward-only", "--format", "markdown"});
  ASSERT_EQ(from_header.exit_code, 0) << from_header.err;
  EXPECT_NE(from_header.out.find("`lifetime=backward,key=identity,cap=0.5`"), std::string::npos)
      << from_header.out;
  testing::BinaryResult overridden = RunBucketsim({"compare", trace, "--policy", "backward-only",
                                                   "--bucket-cap-mb", "2", "--format", "markdown"});
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_NE(overridden.out.find("`lifetime=backward,key=identity,cap=2`"), std::string::npos)
      << overridden.out;
}

// Presets with and without checkpointing, autocast, tied embeddings, the test's groups, at
// world sizes 1 to 4, through --emit-program and then gen program with the same FSDP options:
// the same bytes as the preset itself.
TEST(GenCommand, ProgramOfAPresetGivesThePresetsTrace) {
  struct Case {
    std::vector<std::string> model;  // the preset and its model options
    std::vector<std::string> fsdp;   // the options gen program takes too
  };
  const std::vector<Case> cases = {
      {{"transformer", "--layers", "2", "--hidden", "64", "--heads", "4", "--kv-heads", "2",
        "--seq", "32", "--vocab", "128", "--activation-checkpointing"},
       {"--world-size", "4", "--fp32-reduce-scatter"}},
      {{"transformer", "--layers", "1", "--hidden", "32", "--heads", "2", "--seq", "16", "--vocab",
        "64", "--tied-embeddings", "--autocast", "bf16"},
       {"--param-dtype", "fp32", "--world-size", "1", "--iterations", "1"}},
      {{"fairscale-convnet", "--hidden-dim", "8", "--image-size", "16",
        "--activation-checkpointing"},
       {"--groups", "shared-bn-own", "--world-size", "2", "--param-dtype", "fp32", "--optimizer",
        "sgd-momentum", "--iterations", "4"}},
      {{"fairscale-convnet", "--hidden-dim", "8", "--image-size", "16", "--autocast", "fp16"},
       {"--param-dtype", "fp32", "--fp32-reduce-scatter", "--groups", "per-instance",
        "--world-size", "2", "--optimizer", "sgd-momentum", "--iterations", "4"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string direct = testing::WriteTempFile(fmt::format("direct-{}.json", i), "");
    const std::string program = testing::WriteTempFile(fmt::format("program-{}.json", i), "");
    const std::string via = testing::WriteTempFile(fmt::format("via-{}.json", i), "");
    std::vector<std::string> preset = {"gen"};
    preset.insert(preset.end(), cases[i].model.begin(), cases[i].model.end());
    preset.insert(preset.end(), cases[i].fsdp.begin(), cases[i].fsdp.end());
    std::vector<std::string> args = preset;
    args.insert(args.end(), {"-o", direct});
    ASSERT_EQ(RunBucketsim(args).exit_code, 0);
    // --emit-program alone writes the program and no trace.
    args = preset;
    args.insert(args.end(), {"--emit-program", program});
    testing::BinaryResult emit = RunBucketsim(args);
    ASSERT_EQ(emit.exit_code, 0) << emit.err;
    EXPECT_TRUE(emit.out.empty());
    args = {"gen", "program", program, "-o", via};
    args.insert(args.end(), cases[i].fsdp.begin(), cases[i].fsdp.end());
    testing::BinaryResult run = RunBucketsim(args);
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_TRUE(testing::ReadFile(via) == testing::ReadFile(direct)) << "case " << i;
  }
}

// The events of a trace file, without its header (whose description says how it was made).
nlohmann::json EventsOf(const std::string& path) {
  return nlohmann::json::parse(testing::ReadFile(path)).at("events");
}

// Checkpointing as a what-if (issue 21): the transformer preset's program records each block's
// call, so `gen program --checkpoint Block` (or `all`: every block is an FSDP unit) on the
// program made without checkpointing emits the events of the preset's own
// --activation-checkpointing, one for one, and `--checkpoint none` on the checkpointed program
// those of the preset without it. The regions are held against real checkpointed runs by
// Tools.Oracle (tests/tools/oracle_test.py, CHECKPOINT_CASES).
TEST(GenCommand, CheckpointPlacesTheRegionsOfThePresetsOwnCheckpointing) {
  const std::vector<std::string> gpt = {"gen",      "transformer", "--layers", "2",
                                        "--hidden", "64",          "--heads",  "4",
                                        "--seq",    "32",          "--vocab",  "128"};
  const auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = gpt;
    args.insert(args.end(), more.begin(), more.end());
    return args;
  };
  const std::string plain = testing::WriteTempFile("ckpt-plain-program.json", "");
  const std::string checkpointed = testing::WriteTempFile("ckpt-program.json", "");
  const std::string plain_trace = testing::WriteTempFile("ckpt-plain-trace.json", "");
  const std::string checkpointed_trace = testing::WriteTempFile("ckpt-trace.json", "");
  ASSERT_EQ(RunBucketsim(with({"--emit-program", plain, "-o", plain_trace})).exit_code, 0);
  ASSERT_EQ(RunBucketsim(with({"--activation-checkpointing", "--emit-program", checkpointed, "-o",
                               checkpointed_trace}))
                .exit_code,
            0);
  const std::string out = testing::WriteTempFile("ckpt-out.json", "");
  for (const char* choice : {"Block", "all"}) {
    testing::BinaryResult run =
        RunBucketsim({"gen", "program", plain, "--checkpoint", choice, "-o", out});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.err.find("gen: checkpointing: 2 call(s) of Block, keeping 8.00 KiB\n"),
              std::string::npos)
        << run.err;
    EXPECT_EQ(EventsOf(out), EventsOf(checkpointed_trace)) << choice;
    EXPECT_NE(testing::ReadFile(out).find("2 iterations; checkpointed: Block\","),
              std::string::npos);
  }
  testing::BinaryResult none =
      RunBucketsim({"gen", "program", checkpointed, "--checkpoint", "none", "-o", out});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_NE(none.err.find("gen: checkpointing: none; the program's own 2 region(s) taken out\n"),
            std::string::npos)
      << none.err;
  EXPECT_EQ(EventsOf(out), EventsOf(plain_trace));

  testing::BinaryResult typo =
      RunBucketsim({"gen", "program", plain, "--checkpoint", "Blok", "-o", out});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err,
            "bucketsim: error: --checkpoint Blok: no module of class 'Blok' runs in the program's "
            "forward; did you mean 'Block'? (its classes: Block)\n");
  testing::BinaryResult empty =
      RunBucketsim({"gen", "program", plain, "--checkpoint", "Block,", "-o", out});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_EQ(empty.err,
            "bucketsim: error: --checkpoint 'Block,': expected none, all, or module class names "
            "separated by commas (Block,MLP)\n");
  // A program without module calls (the convnet preset's) cannot be checkpointed here.
  const std::string convnet = testing::WriteTempFile("ckpt-convnet-program.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "fairscale-convnet", "--emit-program", convnet}).exit_code, 0);
  testing::BinaryResult no_calls =
      RunBucketsim({"gen", "program", convnet, "--checkpoint", "all", "-o", out});
  EXPECT_EQ(no_calls.exit_code, 2);
  EXPECT_NE(no_calls.err.find("--checkpoint all: the program has no module calls"),
            std::string::npos)
      << no_calls.err;
}

// Re-wrapping as a what-if (issue 21) places parameters by the names the model gives them, as
// the recorder writes them; the presets name a block's views within the block, so their
// programs are refused, saying why. (Re-wrapped recordings are held against recordings of that
// wrapping by Tools.Oracle and against real FSDP by Tools.Torch2FsdpOracle.)
TEST(GenCommand, WrapRefusesAProgramWhoseParametersShareNames) {
  const std::string program = testing::WriteTempFile("wrap-preset-program.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "transformer", "--layers", "2", "--hidden", "64", "--heads", "4",
                          "--seq", "32", "--vocab", "128", "--emit-program", program})
                .exit_code,
            0);
  testing::BinaryResult run =
      RunBucketsim({"gen", "program", program, "--wrap", "Block", "-o", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("bucketsim: error: --wrap Block: parameter 'ln1.weight' is named twice "
                         "in the program: re-wrapping places parameters by name\n"),
            std::string::npos)
      << run.err;
}

// The batch size as a what-if (issue 21): a program recorded at batch sizes 2, 3 and 4 (by hand
// here; tools/record_program.py --batch-sizes writes them) emitted at 6 has every tensor at 6;
// below the smallest size checked, or from a program recorded at one size, it is refused. The
// scaling is held against real runs at sizes not recorded by Tools.Oracle (BATCH_CASES).
TEST(GenCommand, BatchSizeEmitsAProgramRecordedAtSeveralSizesAtAnother) {
  const std::string program = testing::WriteTempFile("batched-program.json", R"({
  "format": "bucketsim-program", "schema_version": 1, "description": "batched",
  "instances": [{"name": "root", "params": [{"name": "w", "numel": 4}]}],
  "inputs": [{"id": "x", "bytes": 2048, "bytes_per_sample": 1024, "dtype": "fp32"}],
  "forward": [
    {"op": "gather", "instance": "root"},
    {"op": "run", "name": "mm", "uses": ["root"], "inputs": ["x"],
     "outputs": [{"id": "y", "bytes": 4096, "bytes_per_sample": 2048, "dtype": "fp32"}],
     "saves": [{"tensor": "x"}]},
    {"op": "end_forward", "instance": "root"},
    {"op": "run", "name": "loss", "inputs": ["y"],
     "outputs": [{"id": "l", "bytes": 4, "dtype": "fp32", "shape": []}]}
  ],
  "loss": "l", "batch": {"size": 2, "checked": [2, 3, 4]}
})");
  const std::string trace = testing::WriteTempFile("batched-6.json", "");
  testing::BinaryResult run =
      RunBucketsim({"gen", "program", program, "--world-size", "2", "--iterations", "1",
                    "--param-dtype", "fp32", "--batch-size", "6", "-o", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gen: batch size 2 -> 6: the program's tensors 6.00 KiB -> 18.00 KiB\n"),
            std::string::npos)
      << run.err;
  const nlohmann::json doc = nlohmann::json::parse(testing::ReadFile(trace));
  EXPECT_NE(doc.at("description").get<std::string>().find("batched; batch size 6"),
            std::string::npos);
  std::vector<std::uint64_t> activations;
  for (const nlohmann::json& event : doc.at("events")) {
    if (event.value("cat", "") == "activation") {
      activations.push_back(event.at("bytes").get<std::uint64_t>());
    }
  }
  EXPECT_EQ(activations, (std::vector<std::uint64_t>{6144, 12288, 4}));  // x, y, the loss

  testing::BinaryResult below =
      RunBucketsim({"gen", "program", program, "--batch-size", "1", "-o", "/dev/null"});
  EXPECT_EQ(below.exit_code, 2);
  EXPECT_NE(below.err.find("bucketsim: error: --batch-size 1: 1 is below the smallest batch size "
                           "the recording checked (2)"),
            std::string::npos)
      << below.err;
  const std::string one_size = testing::WriteTempFile("one-size-program.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "fairscale-convnet", "--emit-program", one_size}).exit_code, 0);
  testing::BinaryResult unscalable =
      RunBucketsim({"gen", "program", one_size, "--batch-size", "4", "-o", "/dev/null"});
  EXPECT_EQ(unscalable.exit_code, 2);
  EXPECT_NE(unscalable.err.find("--batch-size 4: the program was recorded at one batch size"),
            std::string::npos)
      << unscalable.err;
}

// --checkpoint-impl applies to the regions --checkpoint places: alone it is refused, with why.
TEST(GenCommand, CheckpointImplNeedsRegionsToPlace) {
  const std::string program = testing::WriteTempFile("ckpt-impl-program.json", "");
  ASSERT_EQ(
      RunBucketsim({"gen", "transformer", "--layers", "2", "--emit-program", program}).exit_code,
      0);
  testing::BinaryResult alone = RunBucketsim(
      {"gen", "program", program, "--checkpoint-impl", "no-reentrant", "-o", "/dev/null"});
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("bucketsim: error: --checkpoint-impl no-reentrant: the regions it "
                           "makes are those --checkpoint places"),
            std::string::npos)
      << alone.err;
  testing::BinaryResult placed =
      RunBucketsim({"gen", "program", program, "--checkpoint", "Block", "--checkpoint-impl",
                    "no-reentrant", "-o", "/dev/null"});
  EXPECT_EQ(placed.exit_code, 0) << placed.err;
}

// The sequence length as a what-if: a program recorded at lengths 16, 24, 32 and 40 and batch
// sizes 2, 3 and 4 (by hand here; tools/record_program.py --seq-lens --batch-sizes writes them):
// tokens of 8 B x b x s and a causal mask of s x s bools, emitted at batch size 3 and length 64;
// `tune` varies the length and answers with the largest that fits.
TEST(GenCommand, SeqLenEmitsAProgramRecordedAtSeveralLengthsAtAnother) {
  const std::string program = testing::WriteTempFile("shaped-program.json", R"({
  "format": "bucketsim-program", "schema_version": 1, "description": "shaped",
  "instances": [{"name": "root", "params": [{"name": "w", "numel": 4}]}],
  "inputs": [{"id": "x", "bytes": 256, "bytes_per_sample": 128, "bytes_per_token": 16,
              "bytes_per_sample_token": 8, "dtype": "int64"}],
  "forward": [
    {"op": "gather", "instance": "root"},
    {"op": "run", "name": "mask", "inputs": [{"tensor": "x", "grad": "none"}],
     "outputs": [{"id": "m", "bytes": 256, "bytes_per_token": 32, "bytes_per_token2": 1,
                  "dtype": "bool"}]},
    {"op": "run", "name": "mm", "uses": ["root"], "inputs": [{"tensor": "m", "grad": "none"}],
     "outputs": [{"id": "y", "bytes": 4, "dtype": "fp32", "shape": []}]},
    {"op": "end_forward", "instance": "root"}
  ],
  "loss": "y", "batch": {"size": 2, "checked": [2, 3, 4]},
  "seq": {"length": 16, "checked": [16, 24, 32, 40]}
})");
  const std::string trace = testing::WriteTempFile("shaped-3-64.json", "");
  testing::BinaryResult run =
      RunBucketsim({"gen", "program", program, "--world-size", "2", "--iterations", "1",
                    "--param-dtype", "fp32", "--batch-size", "3", "--seq-len", "64", "-o", trace});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gen: batch size 2 -> 3, sequence length 16 -> 64: the program's "
                         "tensors 516 B -> 5.50 KiB\n"),
            std::string::npos)
      << run.err;
  const nlohmann::json doc = nlohmann::json::parse(testing::ReadFile(trace));
  std::vector<std::uint64_t> activations;
  for (const nlohmann::json& event : doc.at("events")) {
    if (event.value("cat", "") == "activation" && event.value("ev", "") == "alloc") {
      activations.push_back(event.at("bytes").get<std::uint64_t>());
    }
  }
  EXPECT_EQ(activations, (std::vector<std::uint64_t>{8 * 3 * 64, 64 * 64, 4}));

  testing::BinaryResult below =
      RunBucketsim({"gen", "program", program, "--seq-len", "8", "-o", "/dev/null"});
  EXPECT_EQ(below.exit_code, 2);
  EXPECT_NE(below.err.find("bucketsim: error: --seq-len 8: 8 is below the smallest sequence "
                           "length the recording checked (16)"),
            std::string::npos)
      << below.err;

  const std::string json = testing::WriteTempFile("shaped-tune.json", "");
  testing::BinaryResult tune =
      RunBucketsim({"tune", program, "--world-size", "2", "--param-dtype", "fp32", "--fsdp-impl",
                    "fsdp2", "--vary", "seq-len=64,1024,4096", "--budget", "8MiB", "--json", json});
  EXPECT_EQ(tune.exit_code, 0) << tune.err;
  const nlohmann::json report = nlohmann::json::parse(testing::ReadFile(json));
  EXPECT_EQ(report["advice"]["by"], "seq-len");
  EXPECT_EQ(report["advice"]["chosen"], 1);
  EXPECT_EQ(report["advice"]["next"], 4096);  // its 16 MiB mask does not fit
  EXPECT_NE(tune.out.find("The largest sequence length that fits"), std::string::npos) << tune.out;
}

// Precision as a what-if (issue 21): a preset's program made at fp32 (fp32 activations, as a
// model recorded on the CPU) emitted with --param-dtype bf16 --activation-dtype param-dtype has
// every fp32 tensor of its forward halved (the sum is exact); without the flag the activations
// stay fp32 and a note says so; a program recorded under autocast is refused. The cast is held
// against a real bf16 run by Tools.PrecisionOracle (tests/tools/precision_oracle_test.py).
TEST(GenCommand, ActivationDTypeParamDTypeCastsTheFp32Activations) {
  const std::string program = testing::WriteTempFile("fp32-program.json", "");
  const std::string cast = testing::WriteTempFile("bf16-cast.json", "");
  const std::string kept = testing::WriteTempFile("bf16-kept.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "transformer", "--layers", "2", "--hidden", "64", "--heads", "4",
                          "--seq", "32", "--vocab", "128", "--activation-checkpointing",
                          "--param-dtype", "fp32", "--emit-program", program})
                .exit_code,
            0);
  testing::BinaryResult run =
      RunBucketsim({"gen", "program", program, "--world-size", "2", "--param-dtype", "bf16",
                    "--activation-dtype", "param-dtype", "-o", cast});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gen: activations cast to bf16: 52 fp32 tensor(s), 513.26 KiB -> "
                         "256.63 KiB\n"),
            std::string::npos)
      << run.err;

  testing::BinaryResult as_recorded = RunBucketsim(
      {"gen", "program", program, "--world-size", "2", "--param-dtype", "bf16", "-o", kept});
  ASSERT_EQ(as_recorded.exit_code, 0) << as_recorded.err;
  EXPECT_NE(as_recorded.err.find("activations are fp32, as recorded, but a run with "
                                 "--param-dtype bf16 computes in bf16: --activation-dtype "
                                 "param-dtype puts them in it"),
            std::string::npos)
      << as_recorded.err;
  EXPECT_FALSE(testing::ReadFile(kept) == testing::ReadFile(cast));
  // At fp32 there is nothing to cast, and nothing to note.
  testing::BinaryResult fp32 =
      RunBucketsim({"gen", "program", program, "--param-dtype", "fp32", "--activation-dtype",
                    "param-dtype", "-o", "/dev/null"});
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  EXPECT_EQ(fp32.err.find("activations"), std::string::npos) << fp32.err;

  const std::string autocast = testing::WriteTempFile("autocast-program.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "transformer", "--layers", "1", "--hidden", "32", "--heads", "2",
                          "--seq", "16", "--vocab", "64", "--autocast", "bf16", "--param-dtype",
                          "fp32", "--emit-program", autocast})
                .exit_code,
            0);
  testing::BinaryResult refused =
      RunBucketsim({"gen", "program", autocast, "--param-dtype", "fp32", "--activation-dtype",
                    "param-dtype", "-o", "/dev/null"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("--activation-dtype param-dtype: the program was recorded under "
                             "autocast (bf16)"),
            std::string::npos)
      << refused.err;
}

TEST(GenCommand, ProgramErrorsNameFileAndPointer) {
  const std::string bad =
      testing::WriteTempFile("bad-program.json",
                             R"({"format": "bucketsim-program", "schema_version": 1,
          "instances": [{"name": "root", "params": []}],
          "forward": [{"op": "run", "name": "a", "inputs": ["ghost"]}], "loss": "a"})");
  testing::BinaryResult run = RunBucketsim({"gen", "program", bad, "-o", "/dev/null"});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find(bad + ": /forward/0/inputs/0: tensor 'ghost' is not defined by an "
                               "earlier run or input"),
            std::string::npos)
      << run.err;
  testing::BinaryResult trace =
      RunBucketsim({"gen", "program", "traces/tiny-ws2.json", "-o", "/dev/null"});
  EXPECT_EQ(trace.exit_code, 2);
  EXPECT_NE(trace.err.find("this is a trace, not a model program"), std::string::npos) << trace.err;
}

// A tiny GPT's program with `layers` blocks (`gen transformer --emit-program`), `key` (a
// "name": value pair, as a recorded model has it) added, written to `file`; returns its path.
std::string TinyProgramWith(const std::string& file, const std::string& layers,
                            const std::string& key) {
  const std::string program = testing::WriteTempFile(file, "");
  testing::BinaryResult emit =
      RunBucketsim({"gen", "transformer", "--layers", layers, "--hidden", "64", "--heads", "4",
                    "--seq", "32", "--vocab", "128", "--emit-program", program});
  EXPECT_EQ(emit.exit_code, 0) << emit.err;
  const std::string text = testing::ReadFile(program);
  return testing::WriteTempFile(file, text.substr(0, text.rfind('}')) + ", " + key + "}");
}

// A recorded unit's own settings (the program's fsdp "instances") are that unit's: said on
// stderr, and emitted as the same settings given to every unit would be where every unit has
// them; a flag on the command line sets the setting for every unit; a prefetch list naming a
// unit that is not an instance, or a malformed setting, is an error.
TEST(GenCommand, ProgramUnitSettingsAreEachUnitsOwn) {
  std::string program;
  const auto with_fsdp = [&](const std::string& fsdp) {
    program = TinyProgramWith("units-program.json", "2", "\"fsdp\": " + fsdp);
  };
  const auto events = [&](std::vector<std::string> args) {
    const std::string out = testing::WriteTempFile("units.json", "");
    args.insert(args.end(), {"--world-size", "2", "--iterations", "1", "-o", out});
    testing::BinaryResult run = RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const std::string trace = testing::ReadFile(out);
    return std::make_pair(trace.substr(std::min(trace.size(), trace.find("\"events\""))), run.err);
  };
  // Every unit keeps its parameters (the embedding, the root, never reshards after forward).
  with_fsdp(R"({"implementation": "fsdp2", "settings": {"reshard_after_forward": true},
      "instances": {"block0": {"reshard_after_forward": false},
                    "block1": {"reshard_after_forward": false},
                    "head": {"reshard_after_forward": false}}})");
  const auto [all_own, said] = events({"gen", "program", program});
  EXPECT_NE(said.find("gen: unit block1: reshard_after_forward=False\n"), std::string::npos)
      << said;
  const std::string everywhere =
      events({"gen", "program", program, "--reshard-after-forward", "false"}).first;
  EXPECT_TRUE(all_own == everywhere);
  // block0 alone keeps its parameters; a flag sets the setting for every unit.
  with_fsdp(R"({"implementation": "fsdp2", "settings": {"reshard_after_forward": true},
      "instances": {"block0": {"reshard_after_forward": false}}})");
  const std::string block0 = events({"gen", "program", program}).first;
  const std::string nowhere =
      events({"gen", "program", program, "--fsdp-impl", "fsdp2", "--reshard-after-forward", "true"})
          .first;
  EXPECT_TRUE(block0 != everywhere);
  EXPECT_TRUE(block0 != nowhere);
  EXPECT_TRUE(events({"gen", "program", program, "--reshard-after-forward", "false"}).first ==
              everywhere);
  with_fsdp(R"({"implementation": "fsdp2", "settings": {"reshard_after_forward": true},
      "instances": {"block0": {"modules_to_forward_prefetch": ["ghost"]}}})");
  testing::BinaryResult ghost = RunBucketsim({"gen", "program", program, "-o", "/dev/null"});
  EXPECT_EQ(ghost.exit_code, 2);
  EXPECT_NE(ghost.err.find("the program's fsdp settings of unit block0 prefetch ghost, which is "
                           "not one of its instances"),
            std::string::npos)
      << ghost.err;
  with_fsdp(R"({"implementation": "fsdp2", "settings": {"reshard_after_forward": 0}})");
  ghost = RunBucketsim({"gen", "program", program, "-o", "/dev/null"});
  EXPECT_EQ(ghost.exit_code, 2);
  EXPECT_NE(ghost.err.find("the program's fsdp settings.reshard_after_forward is 0: expected "
                           "true, false or a positive int"),
            std::string::npos)
      << ghost.err;
}

// The model's own casts to fp32 that an fp32 recording made no-ops (its target's
// fp32_upcasts): --activation-dtype param-dtype, which puts every fp32 activation in bf16, says
// that a bf16 run keeps those fp32 and how to record for it; as recorded, nothing is said.
TEST(GenCommand, TheModelsOwnUpcastsAreWarnedOfWhenActivationsAreCast) {
  const std::string program =
      TinyProgramWith("upcasts-program.json", "1",
                      R"("target": {"device": "cuda", "gpu": "sm90", "fp32_upcasts": {"calls": 3,
          "modules": ["RMSNorm", "Transformer"]}})");
  const std::vector<std::string> gen = {"gen",           "program", program, "--world-size", "2",
                                        "--param-dtype", "bf16",    "-o",    "/dev/null"};
  std::vector<std::string> cast = gen;
  cast.insert(cast.end(), {"--activation-dtype", "param-dtype"});
  testing::BinaryResult run = RunBucketsim(cast);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("gen: warning: the model casts to fp32 itself (RMSNorm, Transformer: 3 "
                         "call(s) of .float() or .to(torch.float32) on tensors the fp32 "
                         "recording had in fp32 already): a bf16 run copies there and computes "
                         "what follows in fp32, which --activation-dtype param-dtype has put in "
                         "bf16 too; record the model again (tools/record_program.py "
                         "--mixed-precision auto, the default, also records it in bf16) or with "
                         "--dtype bf16"),
            std::string::npos)
      << run.err;
  run = RunBucketsim(gen);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("casts to fp32 itself"), std::string::npos) << run.err;
}

// Selective checkpointing from the command line, on a recorded one-block Llama (the fuzz seed):
// torchtitan's policy saves every other mm and flash attention, said on stderr with the ops the
// program does not have; the trace is smaller after forward than without checkpointing and
// larger than with full checkpointing; the flags need non-reentrant regions that --checkpoint
// places.
TEST(GenCommand, SelectiveCheckpointingIsSaidAndChecked) {
  const std::string program = "tests/fuzz/seeds/program/llama1l-bf16-flash.json";
  const std::vector<std::string> base = {"gen",
                                         "program",
                                         program,
                                         "--fsdp-impl",
                                         "fsdp2",
                                         "--checkpoint",
                                         "TransformerBlock",
                                         "--checkpoint-impl",
                                         "no-reentrant",
                                         "-o"};
  const auto after_fwd = [&](const std::string& save) {
    const std::string trace = testing::WriteTempFile("sac-" + save + ".json", "");
    std::vector<std::string> args = base;
    args.push_back(trace);
    args.insert(args.end(), {"--checkpoint-save", save});
    testing::BinaryResult run = RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    testing::BinaryResult replay =
        RunBucketsim({"compare", trace, "--policy", "fsdp2", "--format", "json"});
    EXPECT_EQ(replay.exit_code, 0) << replay.err;
    const nlohmann::json report = nlohmann::json::parse(replay.out);
    for (const auto& mark : report["policies"][0]["marks"]) {
      if (mark["name"] == "after fwd")
        return std::make_pair(mark["allocated_bytes"].get<long>(), run.err);
    }
    ADD_FAILURE() << replay.out;
    return std::make_pair(0L, run.err);
  };
  const auto [full, full_err] = after_fwd("none");
  const auto [titan, titan_err] = after_fwd("torchtitan");
  const auto [mm, mm_err] = after_fwd("mm");
  EXPECT_LT(full, titan);
  EXPECT_LT(titan, mm);
  EXPECT_NE(titan_err.find("gen: selective checkpointing (torchtitan): saved "
                           "_scaled_dot_product_flash_attention x1, mm x4 ("),
            std::string::npos)
      << titan_err;
  EXPECT_NE(titan_err.find("gen: note: --checkpoint-save torchtitan: no checkpointed run is "
                           "_scaled_dot_product_efficient_attention, reduce_scatter_tensor, abs, "
                           "max"),
            std::string::npos)
      << titan_err;
  EXPECT_NE(mm_err.find("saved mm x7 ("), std::string::npos) << mm_err;

  testing::BinaryResult reentrant =
      RunBucketsim({"gen", "program", program, "--checkpoint", "TransformerBlock",
                    "--checkpoint-save", "mm", "-o", "/dev/null"});
  EXPECT_EQ(reentrant.exit_code, 2);
  EXPECT_NE(reentrant.err.find("--checkpoint TransformerBlock: selective checkpointing needs "
                               "non-reentrant regions (--checkpoint-impl no-reentrant)"),
            std::string::npos)
      << reentrant.err;
  testing::BinaryResult recorded =
      RunBucketsim({"gen", "program", program, "--checkpoint-every", "2", "-o", "/dev/null"});
  EXPECT_EQ(recorded.exit_code, 2);
  EXPECT_NE(recorded.err.find("--checkpoint-save, --checkpoint-every and --checkpoint-early-stop "
                              "set the regions --checkpoint places (CLASS,... or all), and "
                              "--checkpoint is recorded"),
            std::string::npos)
      << recorded.err;
  std::vector<std::string> bad = base;
  bad.insert(bad.end(), {"/dev/null", "--checkpoint-save", "mm/1"});
  testing::BinaryResult policy = RunBucketsim(bad);
  EXPECT_EQ(policy.exit_code, 2);
  EXPECT_NE(policy.err.find("--checkpoint-save 'mm/1': 'mm/1': after '/' comes how often"),
            std::string::npos)
      << policy.err;
}

// A program's "optimizer" key is taken as the flags it says, each unless the command line gives
// it: the trace's events are byte for byte the ones those flags make (the description is the
// program's, written when it was emitted).
TEST(GenCommand, ProgramOptimizerKeyIsTakenUnlessAFlagSaysOtherwise) {
  const std::string program =
      TinyProgramWith("optimizer-program.json", "1",
                      R"("optimizer": {"name": "adamw", "impl": "fused", "weight_decay": 0.1})");
  const std::vector<std::string> common = {"--world-size", "2", "--iterations", "1"};
  const auto trace = [&](std::vector<std::string> args, const std::string& name) {
    const std::string out = testing::WriteTempFile(name, "");
    args.insert(args.end(), common.begin(), common.end());
    args.insert(args.end(), {"-o", out});
    testing::BinaryResult run = RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    const std::string text = testing::ReadFile(out);
    return std::make_pair(text.substr(std::min(text.size(), text.find("\"events\""))), run.err);
  };
  const auto [recorded, said] = trace({"gen", "program", program}, "recorded.json");
  EXPECT_NE(said.find("gen: the model's optimizer was recorded as: --optimizer adamw "
                      "--optimizer-impl fused --weight-decay 0.1"),
            std::string::npos)
      << said;
  EXPECT_EQ(recorded, trace({"gen", "transformer", "--layers", "1", "--hidden", "64", "--heads",
                             "4", "--seq", "32", "--vocab", "128", "--optimizer", "adamw",
                             "--optimizer-impl", "fused", "--weight-decay", "0.1"},
                            "flags.json")
                          .first);
  const auto [overridden, note] =
      trace({"gen", "program", program, "--optimizer-impl", "for-loop"}, "overridden.json");
  EXPECT_NE(note.find("recorded as: --optimizer adamw --weight-decay 0.1\n"), std::string::npos)
      << note;
  EXPECT_NE(overridden, recorded);
  // Another optimizer: nothing of the key (its weight decay was AdamW's, not SGD's).
  const auto [other, why] = trace({"gen", "program", program, "--optimizer", "sgd"}, "sgd.json");
  EXPECT_NE(why.find("gen: note: the program's optimizer (adamw) is not used: --optimizer sgd"),
            std::string::npos)
      << why;
  EXPECT_EQ(other, trace({"gen", "transformer", "--layers", "1", "--hidden", "64", "--heads", "4",
                          "--seq", "32", "--vocab", "128", "--optimizer", "sgd"},
                         "sgd-flags.json")
                       .first);
}

}  // namespace
}  // namespace bucketsim
