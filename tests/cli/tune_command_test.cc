// `bucketsim tune` through the real binary: a small grid whose figures and advice are derived by
// hand below, its JSON beside its table, and the errors of its flags.
//
// tests/schema/tune-program.json: a parameter w (256 fp32, 1 KiB) and, per sample, an input x of
// 1 KiB and a Block module of two runs, h = a(x) (4 KiB; a saves x) and y = b(h) (4 KiB; b saves
// h), then the loss (4 B, 512 with the exact model's rounding). Fp32, one rank, SGD, the exact
// allocator. At batch size B without checkpointing the peak is in b's backward: w, x, h, the
// loss, y's gradient and h's gradient: 1,024 + 512 + B x (1,024 + 3 x 4,096) = 1,536 + 13,312 B
// bytes: 14,848 (14.50 KiB), 28,160 (27.50 KiB), 54,784 (53.50 KiB) at 1, 2, 4. Checkpointing the
// Block keeps x alone in forward but recomputes h and y at the start of its backward, beside
// y's gradient: 4,096 B more per sample here (18.50, 35.50, 69.50 KiB). Under a budget of 40 KiB
// the largest batch size that fits is 2, where both fit; neither takes time (no FLOPs), so the
// one with less peak reserved is chosen: no checkpointing.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "testing/run_binary.h"

namespace bucketsim {
namespace {

using testing::RunBucketsim;

const std::string kProgram = std::string(BUCKETSIM_SOURCE_DIR) + "/tests/schema/tune-program.json";

// Runs of spaces as one: table rows compared whatever their alignment.
std::string Squeezed(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c != ' ' || out.empty() || out.back() != ' ') out += c;
  }
  return out;
}

std::vector<std::string> Tune(std::vector<std::string> more) {
  std::vector<std::string> args = {"tune",         kProgram, "--world-size",  "1",
                                   "--iterations", "1",      "--param-dtype", "fp32",
                                   "--optimizer",  "sgd",    "--allocator",   "exact"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(TuneCommand, TheLargestBatchSizeThatFitsAsDerivedByHand) {
  const std::string json = testing::WriteTempFile("tune.json", "");
  const std::string html = testing::WriteTempFile("tune.html", "");
  testing::BinaryResult run =
      RunBucketsim(Tune({"--vary", "batch-size=1,2,4", "--vary", "checkpoint=none,Block",
                         "--budget", "40KiB", "--json", json, "--html", html}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("tune-program.json: 6 configuration(s), policy always-allocated, time "
                         "profile none\n"),
            std::string::npos)
      << run.out;
  // batch-size, checkpoint, peak alloc and reserved (KiB), fits, step time (ms), pareto.
  for (const char* row :
       {" 1 none 14.50 14.50 yes 0.000 yes\n", " 1 Block 18.50 18.50 yes 0.000\n",
        " 2 none 27.50 27.50 yes 0.000 chosen\n", " 2 Block 35.50 35.50 yes 0.000\n",
        " 4 none 53.50 53.50 no 0.000 yes\n", " 4 Block 69.50 69.50 no 0.000\n"}) {
    EXPECT_NE(Squeezed(run.out).find(row), std::string::npos) << row << "\n" << run.out;
  }
  EXPECT_NE(
      run.out.find(
          "The largest batch size that fits a budget of 40.00 KiB of peak reserved memory "
          "is 2: batch-size=2, checkpoint=none (peak reserved 27.50 KiB, 12.50 KiB under "
          "budget, step 0.000 ms). At batch size 4 nothing fits. Step times are compute "
          "alone (no --profile or --gpu): copies and collectives cost nothing, so offloading and "
          "resharding look free.\nTo emit it: bucketsim "
          "gen program " +
          kProgram +
          " --world-size 1 --iterations 1 --param-dtype fp32 --optimizer sgd --batch-size "
          "2 --checkpoint none -o TRACE\n"),
      std::string::npos)
      << run.out;
  const nlohmann::json report = nlohmann::json::parse(testing::ReadFile(json));
  ASSERT_EQ(report.at("configurations").size(), 6u);
  const std::uint64_t expected[] = {14848, 18944, 28160, 36352, 54784, 71168};
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(report["configurations"][i]["peak_reserved_bytes"], expected[i]) << i;
    EXPECT_EQ(report["configurations"][i]["fits"], i < 4) << i;
  }
  EXPECT_EQ(report["configurations"][2]["settings"],
            nlohmann::json({{"batch-size", "2"}, {"checkpoint", "none"}}));
  EXPECT_EQ(report["advice"]["chosen"], 2);
  EXPECT_EQ(report["advice"]["by"], "batch-size");
  EXPECT_EQ(report["advice"]["next"], 4);
  EXPECT_EQ(report["budget_bytes"], 40960);
  EXPECT_NE(testing::ReadFile(html).find("<p>The largest batch size that fits a budget of 40.00 "
                                         "KiB of peak reserved memory is 2"),
            std::string::npos);
  // The command it gives emits the configuration it reported.
  const std::string trace = testing::WriteTempFile("tune-chosen.json", "");
  ASSERT_EQ(RunBucketsim({"gen", "program", kProgram, "--world-size", "1", "--iterations", "1",
                          "--param-dtype", "fp32", "--optimizer", "sgd", "--batch-size", "2",
                          "--checkpoint", "none", "-o", trace})
                .exit_code,
            0);
  testing::BinaryResult check =
      RunBucketsim({"check", trace, "--policy", "always-allocated", "--allocator", "exact",
                    "--max-peak-reserved", "28160"});
  EXPECT_EQ(check.exit_code, 0) << check.out;
  EXPECT_NE(check.out.find("peak reserved 27.50 KiB (28160 B) within budget"), std::string::npos)
      << check.out;
}

TEST(TuneCommand, WithoutTheBatchSizeTheFastestThatFits) {
  testing::BinaryResult run =
      RunBucketsim(Tune({"--batch-size", "2", "--vary", "checkpoint=Block,none", "--budget",
                         "40KiB", "--format", "json"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_FALSE(report["advice"].contains("by"));
  EXPECT_EQ(report["advice"]["chosen"], 1);  // the same time: the least peak reserved, none
  EXPECT_EQ(report["fixed"],
            nlohmann::json({"--world-size 1", "--iterations 1", "--param-dtype fp32",
                            "--optimizer sgd", "--batch-size 2"}));
}

// The policy is varied too (not a gen program flag): the command it gives says which policy
// to replay the trace with.
TEST(TuneCommand, ThePolicyCanBeVaried) {
  testing::BinaryResult run = RunBucketsim(Tune(
      {"--batch-size", "2", "--vary", "policy=unbucketed,always-allocated", "--format", "json"}));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  ASSERT_EQ(report["configurations"].size(), 2u);
  EXPECT_EQ(report["policy"], "unbucketed, always-allocated");
  EXPECT_EQ(report["configurations"][1]["settings"],
            nlohmann::json({{"policy", "always-allocated"}}));
  const std::size_t chosen = report["advice"]["chosen"];
  const std::string policy = report["configurations"][chosen]["settings"]["policy"];
  const std::string command = report["advice"]["command"];
  EXPECT_TRUE(
      command.ends_with(" --batch-size 2 -o TRACE, then compare or check TRACE --policy " + policy))
      << command;
}

TEST(TuneCommand, NothingFitsIsExitOneWithTheClosest) {
  testing::BinaryResult run = RunBucketsim(Tune({"--vary", "batch-size=2,4", "--budget", "20KiB"}));
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_NE(run.out.find("Nothing fits a budget of 20.00 KiB of peak reserved memory. The least "
                         "peak reserved: batch-size=2 (peak reserved 27.50 KiB, step 0.000 ms)."),
            std::string::npos)
      << run.out;
}

// --vary checkpoint-save=auto on a recorded one-block Llama (the program fuzz seed): full
// checkpointing, then the greedy order's policies, every other mm before every mm; the chosen
// one printed as a policy function for create_selective_checkpoint_contexts; a search without
// a fixed non-reentrant --checkpoint is refused.
TEST(TuneCommand, TheSavePolicySearch) {
  const std::string llama = "tests/fuzz/seeds/program/llama1l-bf16-flash.json";
  testing::BinaryResult run =
      RunBucketsim({"tune", llama, "--fsdp-impl", "fsdp2", "--world-size", "8", "--param-dtype",
                    "bf16", "--checkpoint", "TransformerBlock", "--checkpoint-impl", "no-reentrant",
                    "--vary", "checkpoint-save=auto", "--format", "json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("tune: checkpoint-save=auto: 17 polic(ies): full checkpointing, then "
                         "ops added in the order of recompute FLOPs avoided per byte cached"),
            std::string::npos)
      << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  std::vector<std::string> tried;
  for (const auto& point : report["configurations"])
    tried.push_back(point["settings"]["checkpoint-save"]);
  ASSERT_GE(tried.size(), 3u);
  EXPECT_EQ(tried[0], "none");
  EXPECT_EQ(tried[1], "_scaled_dot_product_flash_attention");
  EXPECT_EQ(tried[2], "_scaled_dot_product_flash_attention,mm/2");
  EXPECT_EQ(tried[3], "_scaled_dot_product_flash_attention,mm");

  testing::BinaryResult table =
      RunBucketsim({"tune", llama, "--fsdp-impl", "fsdp2", "--world-size", "8", "--param-dtype",
                    "bf16", "--checkpoint", "TransformerBlock", "--checkpoint-impl", "no-reentrant",
                    "--vary", "checkpoint-save=none,mm/2"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("Its selective checkpointing as a policy for torch.utils.checkpoint:"
                           "\n\n# --checkpoint-save mm/2\n"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("COUNTED = [  # (ops sharing one counter, N): every N-th call "
                           "recomputed\n    ({\"mm\"}, 2),\n]"),
            std::string::npos)
      << table.out;

  testing::BinaryResult unfixed =
      RunBucketsim({"tune", llama, "--fsdp-impl", "fsdp2", "--vary", "checkpoint-save=auto"});
  EXPECT_EQ(unfixed.exit_code, 2);
  EXPECT_NE(unfixed.err.find("--vary checkpoint-save=auto searches the policies of the regions "
                             "a fixed --checkpoint CLASS places, non-reentrant"),
            std::string::npos)
      << unfixed.err;
  testing::BinaryResult gen = RunBucketsim({"gen", "program", llama, "--checkpoint",
                                            "TransformerBlock", "--checkpoint-impl", "no-reentrant",
                                            "--checkpoint-save", "auto", "-o", "/dev/null"});
  EXPECT_EQ(gen.exit_code, 2);
  EXPECT_NE(gen.err.find("'auto' is tune's search"), std::string::npos) << gen.err;
}

// --gpu on a one-block Llama at 8 ranks: the GPU's estimate prices collectives and copies, its
// capacity is the device, and CPU offload now costs its host copies and the CPU's AdamW step
// (without --gpu it tied with the device's step and won on memory).
TEST(TuneCommand, AGpusEstimatePricesOffload) {
  const std::string llama = "tests/fuzz/seeds/program/llama1l-bf16-flash.json";
  const std::vector<std::string> args = {
      "tune",          llama,  "--fsdp-impl", "fsdp2", "--world-size", "8",
      "--param-dtype", "bf16", "--optimizer", "adamw", "--vary",       "offload-params=false,true"};
  std::vector<std::string> on_gpu = args;
  on_gpu.insert(on_gpu.end(), {"--gpu", "h100-80gb", "--format", "json"});
  testing::BinaryResult run = RunBucketsim(on_gpu);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const nlohmann::json report = nlohmann::json::parse(run.out);
  EXPECT_EQ(report["context"]["time_profile"], "h100-80gb-estimate");
  EXPECT_EQ(report["device_memory_bytes"], 85045477376);
  EXPECT_EQ(report["time_estimate"].get<std::string>().substr(0, 81),
            "Times are an estimate from the NVIDIA H100 80GB HBM3 (SXM)'s published rates (989");
  const auto& points = report["configurations"];
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0]["settings"]["offload-params"], "false");
  EXPECT_LT(points[0]["step_time_us"].get<double>(), points[1]["step_time_us"].get<double>());
  EXPECT_EQ(report["advice"]["chosen"], 0);

  testing::BinaryResult flat = RunBucketsim(args);
  ASSERT_EQ(flat.exit_code, 0) << flat.err;
  EXPECT_NE(flat.out.find("The fastest configuration that fits: offload-params=true ("),
            std::string::npos)
      << flat.out;

  testing::BinaryResult both = RunBucketsim(
      {"gen", "program", llama, "--gpu", "h100-80gb", "--device-tflops", "300", "-o", "/dev/null"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("device_tflops and gpu both price compute: give one"), std::string::npos)
      << both.err;
  testing::BinaryResult varied = RunBucketsim({"tune", llama, "--vary", "gpu=h100-80gb,a100-80gb"});
  EXPECT_EQ(varied.exit_code, 2);
  EXPECT_NE(varied.err.find("--vary gpu: tune prices one GPU"), std::string::npos) << varied.err;
}

TEST(TuneCommand, BadVariesAreUsageErrors) {
  const auto error = [](std::vector<std::string> more) {
    testing::BinaryResult run = RunBucketsim(Tune(std::move(more)));
    EXPECT_EQ(run.exit_code, 2) << run.out;
    return run.err;
  };
  EXPECT_EQ(error({"--vary", "batch-size=2,0"}),
            "bucketsim: error: --vary 'batch-size=2,0': '0' is not a batch size (an integer of "
            "at least 1)\n");
  EXPECT_EQ(error({"--vary", "batch-size"}),
            "bucketsim: error: --vary 'batch-size': expected FLAG=VALUE,VALUE,... (e.g. "
            "batch-size=2,4,8)\n");
  EXPECT_EQ(error({"--vary", "world-size=2,4"}),
            "bucketsim: error: --vary world-size: --world-size is also given; vary it or fix "
            "it\n");
  EXPECT_EQ(error({"--vary", "colour=red"}),
            "bucketsim: error: --vary colour: not a flag of gen program (the FSDP options, wrap, "
            "batch-size, seq-len, checkpoint, checkpoint-impl, checkpoint-save, "
            "checkpoint-every, checkpoint-early-stop, activation-dtype) nor policy\n");
  EXPECT_EQ(error({"--vary", "optimizer-impl=foreach,fast"}).substr(0, 52),
            "bucketsim: error: --vary optimizer-impl=foreach,fast");
  EXPECT_EQ(error({"--vary", "checkpoint=Blok"}),
            "bucketsim: error: checkpoint=Blok: --checkpoint Blok: no module of class 'Blok' "
            "runs in the program's forward; did you mean 'Block'? (its classes: Block)\n");
  EXPECT_EQ(error({"--vary", "batch-size=1,2", "--vary", "batch-size=4"}),
            "bucketsim: error: --vary batch-size: varied twice\n");
}

}  // namespace
}  // namespace bucketsim
