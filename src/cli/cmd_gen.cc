// bucketsim gen transformer [options] -o FILE: a trace from a model preset.
#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "cli/command.h"
#include "gen/transformer_preset.h"
#include "io/trace_writer.h"

namespace bucketsim {
namespace {

struct TransformerFlags {
  TransformerConfig config;
  std::string dtype = "bf16";
  std::string reduce_dtype;  // default: the compute dtype
  std::string groups = "per-instance";
  std::string optimizer = "adam";
  std::string output = "-";
};

Status ResolveFlags(TransformerFlags& flags) {
  std::optional<DType> dtype = ParseDType(flags.dtype);
  if (!dtype) return InvalidArgument(fmt::format("--dtype '{}' is not a dtype", flags.dtype));
  flags.config.compute_dtype = *dtype;
  std::string reduce = flags.reduce_dtype.empty() ? flags.dtype : flags.reduce_dtype;
  std::optional<DType> reduce_dtype = ParseDType(reduce);
  if (!reduce_dtype)
    return InvalidArgument(fmt::format("--reduce-dtype '{}' is not a dtype", reduce));
  flags.config.reduce_dtype = *reduce_dtype;
  flags.config.group_layout =
      flags.groups == "shared" ? GroupLayout::kShared : GroupLayout::kPerInstance;
  flags.config.optimizer = flags.optimizer == "sgd"            ? OptimizerKind::kSgd
                           : flags.optimizer == "sgd-momentum" ? OptimizerKind::kSgdMomentum
                                                               : OptimizerKind::kAdam;
  return Status::Ok();
}

int RunTransformer(TransformerFlags flags) {
  Status status = ResolveFlags(flags);
  if (!status.ok()) return ReportError(status);
  if (flags.output == "-") {
    TraceWriter writer(std::cout, "stdout");
    status = GenerateTransformer(flags.config, writer);
  } else {
    Result<std::unique_ptr<TraceWriter>> writer = TraceWriter::Open(flags.output);
    if (!writer.ok()) return ReportError(writer.status());
    status = GenerateTransformer(flags.config, **writer);
  }
  if (!status.ok()) return ReportError(status);
  if (flags.output != "-") std::fprintf(stderr, "wrote %s\n", flags.output.c_str());
  return kExitOk;
}

void AddTransformer(CLI::App& gen, CommandContext& context) {
  CLI::App* command = gen.add_subcommand(
      "transformer", "GPT-style transformer under fairscale FSDP: one instance per block");
  auto flags = std::make_shared<TransformerFlags>();
  TransformerConfig& c = flags->config;
  command->add_option("--layers", c.layers, "Transformer blocks")->capture_default_str();
  command->add_option("--hidden", c.hidden, "Hidden size h")->capture_default_str();
  command->add_option("--heads", c.heads, "Attention heads a")->capture_default_str();
  command->add_option("--seq", c.seq, "Sequence length s")->capture_default_str();
  command->add_option("--micro-batch", c.micro_batch, "Micro-batch size b")->capture_default_str();
  command->add_option("--vocab", c.vocab, "Vocabulary size")->capture_default_str();
  command->add_option("--world-size", c.world_size, "Ranks")->capture_default_str();
  command->add_option("--rank", c.rank, "This trace's rank")->capture_default_str();
  command->add_option("--iterations", c.iterations, "Training iterations")->capture_default_str();
  command->add_option("--dtype", flags->dtype, "Compute dtype (all-gather, activations, grads)")
      ->capture_default_str();
  command->add_option("--reduce-dtype", flags->reduce_dtype,
                      "Reduce-scatter dtype (default: the compute dtype)");
  command
      ->add_option("--groups", flags->groups,
                   "Process-group objects: per-instance (fairscale at #633) or shared (#678)")
      ->check(CLI::IsMember({"per-instance", "shared"}))
      ->capture_default_str();
  command->add_option("--optimizer", flags->optimizer, "sgd, sgd-momentum or adam")
      ->check(CLI::IsMember({"sgd", "sgd-momentum", "adam"}))
      ->capture_default_str();
  command->add_flag("--activation-checkpointing", c.activation_checkpointing,
                    "Checkpoint every transformer block: keep only its input in forward, "
                    "recompute its activations in backward");
  command->add_option("--bucket-cap-mb", c.bucket_cap_mb, "The run's bucket_cap_mb")
      ->capture_default_str();
  command->add_option("--device-tflops", c.device_tflops, "Sustained TFLOP/s for compute spans")
      ->capture_default_str();
  command->add_option("-o,--output", flags->output, "Output file (- for stdout)")
      ->capture_default_str();
  command->footer(
      "Example (the shipped default trace):\n"
      "  bucketsim gen transformer --layers 24 --hidden 1024 --heads 16 --seq 2048 \\\n"
      "      --world-size 8 --iterations 2 -o traces/gpt-24l-h1024-ws8.json");
  command->callback([flags, &context] { context.exit_code = RunTransformer(*flags); });
}

}  // namespace

void AddGenCommand(CLI::App& command, CommandContext& context) {
  command.require_subcommand(1);
  command.footer(
      "Presets: transformer. Run 'bucketsim gen transformer --help' for its parameters.");
  AddTransformer(command, context);
}

}  // namespace bucketsim
