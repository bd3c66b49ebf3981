// `gen program`'s settings through the real binary (issue 30): --unit-setting gives one unit a
// setting by the mechanism a recorded model's fsdp "instances" use, a program instance key the
// run does not apply is said by name, every flag's stated default is the one applied, a bf16
// recording's own fp32 tensors are noted as its own, and --device-memory takes a GPU's name.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "cli/program_flags.h"
#include "gen/gen_options.h"
#include "memory/device_capacity.h"
#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;

// A tiny GPT's program (embedding, block0, block1, head: `gen transformer --emit-program`) at
// `param_dtype`, with `key` (a "name": value pair) added when given; returns its path.
std::string TinyProgram(const std::string& file, const std::string& key = "",
                        const std::string& param_dtype = "bf16") {
  const std::string program = testing::WriteTempFile(file, "");
  testing::BinaryResult emit = RunBucketsim(
      {"gen", "transformer", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32",
       "--vocab", "128", "--param-dtype", param_dtype, "--emit-program", program});
  EXPECT_EQ(emit.exit_code, 0) << emit.err;
  if (key.empty()) return program;
  const std::string text = testing::ReadFile(program);
  return testing::WriteTempFile(file, text.substr(0, text.rfind('}')) + ", " + key + "}");
}

struct Emitted {
  std::string trace;  // the whole file
  std::string err;
};

// `gen program PROGRAM ARGS... --world-size 2 --iterations 1 -o FILE` (without the shape when
// `small` is false: every flag then at its default unless `args` gives it).
Emitted Emit(const std::string& program, std::vector<std::string> args, bool small = true) {
  const std::string out = testing::WriteTempFile("settings-trace.json", "");
  args.insert(args.begin(), {"gen", "program", program});
  if (small) args.insert(args.end(), {"--world-size", "2", "--iterations", "1"});
  args.insert(args.end(), {"-o", out});
  testing::BinaryResult run = RunBucketsim(args);
  EXPECT_EQ(run.exit_code, 0) << fmt::format("{}", fmt::join(args, " ")) << "\n" << run.err;
  return {testing::ReadFile(out), run.err};
}

std::string EventsOf(const std::string& trace) {
  return trace.substr(std::min(trace.size(), trace.find("\"events\"")));
}

// Replaces the program's "reshard_after_forward":false of head (the preset's) with block0's.
std::string WithBlock0KeptAfterForward(const std::string& file) {
  std::string text = testing::ReadFile(TinyProgram(file));
  const std::string kept = R"(,"reshard_after_forward":false)";
  text.erase(text.find(kept), kept.size());
  const std::string block0 = R"({"name":"block0")";
  const std::size_t line_end = text.find('\n', text.find(block0));
  text.insert(text.rfind('}', line_end), kept);  // the instance object's own end
  return testing::WriteTempFile(file, text);
}

// torchtitan's FSDP2 recipe on a program recorded unwrapped: `last` is the last unit the
// forward gathers, and its setting is the trace a recorded fsdp "instances" entry gives; it
// changes the trace, and wins over the all-units flag for that unit.
TEST(GenUnitSetting, LastUnitsSettingIsTheRecordedInstancesForm) {
  const std::string program = WithBlock0KeptAfterForward("unit-setting-program.json");
  const Emitted flag =
      Emit(program, {"--fsdp-impl", "fsdp2", "--unit-setting", "last:reshard_after_forward=false"});
  EXPECT_NE(flag.err.find("gen: unit head: reshard_after_forward=False (--unit-setting)\n"),
            std::string::npos)
      << flag.err;
  const std::string recorded = TinyProgram(
      "unit-setting-recorded.json",
      R"("fsdp": {"implementation": "fsdp2", "settings": {"reshard_after_forward": true},
          "instances": {"head": {"reshard_after_forward": false}}})");
  // (The preset's head carries reshard_after_forward false as an instance key, which fsdp2
  // does not apply: both programs reshard it unless told otherwise.)
  EXPECT_EQ(
      EventsOf(Emit(recorded, {}).trace),
      EventsOf(Emit(TinyProgram("unit-setting-plain.json"),
                    {"--fsdp-impl", "fsdp2", "--unit-setting", "last:reshard_after_forward=false"})
                   .trace));
  const Emitted without = Emit(program, {"--fsdp-impl", "fsdp2"});
  EXPECT_NE(EventsOf(flag.trace), EventsOf(without.trace));
  // By name, the same unit.
  EXPECT_EQ(flag.trace, Emit(program, {"--fsdp-impl", "fsdp2", "--unit-setting",
                                       "head:reshard_after_forward=0"})
                            .trace);
  // Over the all-units flag: every unit keeps its parameters but block1.
  const std::string all_kept =
      Emit(program, {"--fsdp-impl", "fsdp2", "--reshard-after-forward", "false"}).trace;
  const std::string block1_reshards =
      Emit(program, {"--fsdp-impl", "fsdp2", "--reshard-after-forward", "false", "--unit-setting",
                     "block1:reshard_after_forward=true"})
          .trace;
  EXPECT_NE(all_kept, block1_reshards);
  // fsdp1: each unit's own backward_prefetch.
  EXPECT_NE(
      Emit(program, {"--fsdp-impl", "fsdp1", "--unit-setting", "block1:backward_prefetch=none"})
          .trace,
      Emit(program, {"--fsdp-impl", "fsdp1"}).trace);
}

TEST(GenUnitSetting, BadSettingsAreErrorsThatSayWhy) {
  const std::string program = TinyProgram("unit-setting-bad.json");
  const auto refused = [&](std::vector<std::string> args, const std::string& message) {
    args.insert(args.begin(), {"gen", "program", program});
    args.insert(args.end(), {"-o", "/dev/null"});
    testing::BinaryResult run = RunBucketsim(args);
    EXPECT_EQ(run.exit_code, 2) << run.err;
    EXPECT_NE(run.err.find(message), std::string::npos) << run.err;
  };
  refused({"--fsdp-impl", "fsdp2", "--unit-setting", "blok1:reshard_after_forward=false"},
          "--unit-setting blok1:reshard_after_forward=false: no unit 'blok1'; did you mean "
          "'block1'?; the units are embedding, block0, block1, head; root (embedding), last "
          "(head)");
  refused({"--fsdp-impl", "fsdp1", "--unit-setting", "last:reshard_after_forward=false"},
          "reshard_after_forward is a unit setting of --fsdp-impl fsdp2 (this is fsdp1: "
          "backward_prefetch)");
  refused({"--unit-setting", "last:backward_prefetch=pre"},
          "backward_prefetch is a unit setting of --fsdp-impl fsdp1 (this is fairscale, which "
          "has none)");
  refused({"--fsdp-impl", "fsdp2", "--unit-setting", "last:reshard_after_forward=maybe"},
          "--unit-setting last:reshard_after_forward=maybe: 'maybe' is not a boolean");
  refused({"--fsdp-impl", "fsdp1", "--unit-setting", "root:backward_prefetch=BACKWARD_PRE"},
          "'BACKWARD_PRE' is not one of pre, post or none");
  refused({"--fsdp-impl", "fsdp2", "--unit-setting", "last:reshard_after_froward=false"},
          "no unit setting 'reshard_after_froward' (fsdp2 takes reshard_after_forward, "
          "modules_to_forward_prefetch, modules_to_backward_prefetch)");
  refused({"--fsdp-impl", "fsdp2", "--unit-setting", "last"},
          "--unit-setting last: expected SELECTOR:KEY=VALUE");
}

// A program instance's reshard_after_forward false is fairscale's wrapper setting: applied
// there, and under fsdp2 named as not applied (with what applies), never silently dropped.
TEST(GenProgramInstanceKeys, AKeyTheRunDoesNotApplyIsSaid) {
  const std::string program = WithBlock0KeptAfterForward("instance-key-program.json");
  const std::string plain = TinyProgram("instance-key-plain.json");
  const Emitted fsdp2 = Emit(program, {"--fsdp-impl", "fsdp2"});
  EXPECT_NE(fsdp2.err.find("gen: note: instance(s) block0: reshard_after_forward false is "
                           "fairscale's wrapper setting, not applied under fsdp2 "
                           "(--unit-setting block0:reshard_after_forward=false gives "
                           "fully_shard's)"),
            std::string::npos)
      << fsdp2.err;
  const Emitted fsdp1 = Emit(program, {"--fsdp-impl", "fsdp1"});
  EXPECT_NE(fsdp1.err.find("block0: reshard_after_forward false is fairscale's wrapper setting, "
                           "not applied under fsdp1"),
            std::string::npos)
      << fsdp1.err;
  const Emitted fairscale = Emit(program, {});
  EXPECT_EQ(fairscale.err.find("not applied"), std::string::npos) << fairscale.err;
  EXPECT_NE(EventsOf(fairscale.trace), EventsOf(Emit(plain, {}).trace));
}

// Every flag of `gen program` with a stated default: the trace with the flag absent is the
// trace with the flag at its stated default, byte for byte, under each implementation (and,
// where the default depends on the implementation or the optimizer, at each one's).
TEST(GenProgramDefaults, EveryStatedDefaultIsTheOneApplied) {
  const std::string program = TinyProgram("defaults-program.json");
  // Flags whose default is no value to give: --fsdp-impl is what the loop varies; MODEL, -o and
  // the repeatable --unit-setting (none by default) have no default to hold.
  const std::vector<std::string> not_applicable = {"fsdp-impl"};
  // Defaults that depend on another flag, as their help states them.
  const std::map<std::string, std::map<std::string, std::string>> by_impl = {
      {"param-dtype", {{"fairscale", "bf16"}, {"fsdp1", "fp32"}, {"fsdp2", "fp32"}}},
      {"optimizer-impl", {{"fairscale", "for-loop"}, {"fsdp1", "foreach"}, {"fsdp2", "foreach"}}},
      {"groups", {{"fairscale", "per-instance"}, {"fsdp1", "shared"}, {"fsdp2", "shared"}}},
  };
  const std::map<std::string, std::string> weight_decay_by_optimizer = {{"adam", "0"},
                                                                        {"adamw", "0.01"}};
  GenOptions fresh;
  std::vector<std::pair<std::string, std::string>> stated;  // flag, default
  for (const PresetParam& param : GenOptionParams(fresh)) {
    if (std::find(not_applicable.begin(), not_applicable.end(), param.name) !=
        not_applicable.end()) {
      continue;
    }
    if (!param.default_depends_on.empty()) {
      EXPECT_TRUE(by_impl.count(param.name) > 0 || param.name == "weight-decay") << param.name;
      continue;
    }
    stated.emplace_back(param.name, param.get());
  }
  // The what-ifs' defaults, as their help prints them.
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"wrap", "recorded"},
                                                        {"batch-size", "0"},
                                                        {"seq-len", "0"},
                                                        {"checkpoint", "recorded"},
                                                        {"checkpoint-impl", "reentrant"},
                                                        {"checkpoint-save", "none"},
                                                        {"checkpoint-every", "1"},
                                                        {"checkpoint-early-stop", "true"},
                                                        {"activation-dtype", "recorded"}}) {
    stated.emplace_back(flag, value);
  }
  EXPECT_EQ(stated.size() + by_impl.size() + 1 + not_applicable.size(),
            GenOptionParams(fresh).size() + kWhatIfFlags.size());
  for (const std::string impl : {"fairscale", "fsdp1", "fsdp2"}) {
    const std::string absent = Emit(program, {"--fsdp-impl", impl}, false).trace;
    for (const auto& [flag, value] : stated) {
      EXPECT_EQ(absent,
                Emit(program, {"--fsdp-impl", impl, "--" + flag + "=" + value}, false).trace)
          << impl << " --" << flag << "=" << value;
    }
    for (const auto& [flag, values] : by_impl) {
      EXPECT_EQ(absent,
                Emit(program, {"--fsdp-impl", impl, "--" + flag, values.at(impl)}, false).trace)
          << impl << " --" << flag << " " << values.at(impl);
    }
    for (const auto& [optimizer, decay] : weight_decay_by_optimizer) {
      EXPECT_EQ(
          Emit(program, {"--fsdp-impl", impl, "--optimizer", optimizer}, false).trace,
          Emit(program, {"--fsdp-impl", impl, "--optimizer", optimizer, "--weight-decay", decay},
               false)
              .trace)
          << impl << " " << optimizer;
    }
  }
  // The help states those defaults in words, and prints no single automatic one for them.
  testing::BinaryResult help = RunBucketsim({"gen", "program", "--help"});
  for (const char* words :
       {"default bf16 for fairscale, fp32 (no MixedPrecision) for fsdp1 and fsdp2",
        "default torch's: for-loop for fairscale, foreach for fsdp1 and fsdp2",
        "(default torch's: 0, AdamW 0.01)", "the default for fairscale"}) {
    EXPECT_NE(help.out.find(words), std::string::npos) << words;
  }
  EXPECT_EQ(help.out.find("fsdp1 and fsdp2 (default"), std::string::npos) << help.out;
}

// A model recorded in bf16 keeps the fp32 tensors it computes in fp32 on purpose: the note
// says so, and suggests --activation-dtype only for a recording whose floating activations are
// all fp32.
TEST(GenProgramPrecisionNote, ABf16RecordingsFp32TensorsAreItsOwn) {
  const Emitted bf16 = Emit(TinyProgram("bf16-recorded.json"), {"--param-dtype", "bf16"});
  EXPECT_NE(bf16.err.find("'s 14 fp32 activation(s) (33.26 KiB) are kept as recorded: the model "
                          "computes them in fp32 itself (39 floating activation(s) were recorded "
                          "in bf16 or fp16)"),
            std::string::npos)
      << bf16.err;
  EXPECT_EQ(bf16.err.find("--activation-dtype param-dtype puts them"), std::string::npos);
  const Emitted fp32 =
      Emit(TinyProgram("fp32-recorded.json", "", "fp32"), {"--param-dtype", "bf16"});
  EXPECT_NE(fp32.err.find("activations are fp32, as recorded, but a run with --param-dtype bf16 "
                          "computes in bf16: --activation-dtype param-dtype puts them in it"),
            std::string::npos)
      << fp32.err;
}

// --device-memory NAME is the bytes torch reports for that GPU, in every command taking it.
TEST(DeviceMemoryFlag, AGpusNameIsItsTotalMemory) {
  for (const NamedDevice& device : NamedDevices()) {
    const std::string bytes = std::to_string(device.total_memory_bytes);
    testing::BinaryResult named =
        RunBucketsim({"check", "traces/tiny-ws2.json", "--policy", "backward-only",
                      "--device-memory", std::string(device.name)});
    testing::BinaryResult sized = RunBucketsim(
        {"check", "traces/tiny-ws2.json", "--policy", "backward-only", "--device-memory", bytes});
    EXPECT_EQ(named.exit_code, 0) << named.err;
    EXPECT_EQ(named.out, sized.out) << device.name;
  }
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"check", "traces/tiny-ws2.json", "--policy", "backward-only"},
        {"compare", "traces/tiny-ws2.json"},
        {"validate", "traces/tiny-ws2.json"}}) {
    std::vector<std::string> args = command;
    args.insert(args.end(), {"--device-memory", "h100"});
    testing::BinaryResult unknown = RunBucketsim(args);
    EXPECT_EQ(unknown.exit_code, 2) << command.front();
    EXPECT_NE(unknown.err.find("--device-memory: 'h100' is not a size"), std::string::npos)
        << unknown.err;
    EXPECT_NE(unknown.err.find(
                  "or a device's name: h100-80gb, h100-94gb, h100-96gb, a100-80gb, a100-40gb, "
                  "l40s-48gb"),
              std::string::npos)
        << unknown.err;
  }
}

}  // namespace
}  // namespace bucketsim
