#include "gen/convnet_preset.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/fsdp_emitter.h"
#include "gen/model_program.h"
#include "gen/program_builder.h"

namespace bucketsim {
namespace {

constexpr std::uint64_t kStemChannels = 64;
constexpr std::uint64_t kClasses = 10;
// Elementwise work of a BatchNorm and of the in-place ReLU after it, in FLOPs per element: an
// order of magnitude for the time model (both are memory-bound).
constexpr double kBnFlopsPerElement = 4;
constexpr double kReluFlopsPerElement = 1;

// One Conv2d / BatchNorm2d / ReLU(inplace) group of the model.
struct ConvGroup {
  std::string conv_name;  // module path of the conv ("stem.0"); the BN is the next index
  std::string bn_name;    // "stem.1": its FSDP instance
  std::string relu_name;  // "stem.2"
  std::uint64_t in_channels, out_channels, kernel;
};

// The model as a program of runs over tensors (traces/README.md, "Model programs"). Each
// Conv2d / BatchNorm2d / ReLU(inplace) is a run. What each saves for backward (PyTorch's
// derivatives.yaml): a conv its input (and weight, a parameter); a BN in training its input
// and its batch mean and inverse std (C fp32 each); the in-place ReLU its result, the BN's
// output overwritten (threshold_backward reads the result). The gradients their backward makes:
// every input that requires grad gets a new tensor of its size (the batch gets none); the
// Flatten view passes its gradient on (a view of it). Under torch.autocast (CUDA's op lists,
// aten/src/ATen/autocast_mode.cpp) only the convolutions and the linear head are autocast ops
// (lower precision: the stem casts the fp32 batch to a copy it saves, each casts its weight);
// batch_norm, relu, adaptive_avg_pool2d and mean are on no list and run in their input's dtype,
// the autocast dtype from the stem conv on (cuDNN's batch norm takes fp16 input with fp32
// weights and keeps fp32 statistics). So every activation is in the autocast dtype.
class ConvnetBuilder {
 public:
  explicit ConvnetBuilder(const ConvnetConfig& config)
      : config_(config),
        n_(static_cast<std::uint64_t>(config.batch)),
        // stem: k3 without padding; the blocks' k5 convs have padding 2 and keep the size.
        spatial_(static_cast<std::uint64_t>(config.image_size) - 2),
        activation_dtype_(config.autocast.value_or(config.compute_dtype)),
        e_(ElementSize(activation_dtype_)),
        program_(Describe()) {}

  ModelProgram Build() {
    const auto hd = static_cast<std::uint64_t>(config_.hidden_dim);
    const std::vector<ConvGroup> stem = {{"stem.0", "stem.1", "stem.2", 3, kStemChannels, 3}};
    const std::vector<ConvGroup> blocks = {
        {"blocks.0", "blocks.1", "blocks.2", kStemChannels, hd, 5},
        {"blocks.3", "blocks.4", "blocks.5", hd, hd, 5},
        {"blocks.6", "blocks.7", "blocks.8", hd, hd, 5}};
    program_.SetAutocast(config_.autocast);

    // The instances in named_modules() order of the root: root, stem, its BN, blocks, their
    // BNs, head. The root owns no parameters and, as the root, never reshards.
    program_.AddInstance({"root", {}, true, false});
    const std::size_t stem_instance = program_.AddInstance({"stem", Params(stem), true, true});
    std::vector<std::size_t> stem_bns = AddBatchNorms(stem);
    const std::size_t blocks_instance =
        program_.AddInstance({"blocks", Params(blocks), true, true});
    std::vector<std::size_t> block_bns = AddBatchNorms(blocks);
    // Each parameter with its dim 0 (FSDP2 shards it): nn.Linear's weight is (out, in).
    const std::vector<ParamView> head_views = {{"weight", hd * kClasses, kClasses},
                                               {"bias", kClasses, kClasses}};
    const std::vector<GenParam> head_params =
        config_.flatten_parameters
            ? std::vector<GenParam>{{"flat_param_0", SaturatingProduct({hd + 1, kClasses}),
                                     head_views}}
            : std::vector<GenParam>{{"weight", hd * kClasses, {}, kClasses},
                                    {"bias", kClasses, {}, kClasses}};
    const std::size_t head_instance = program_.AddInstance({"head", head_params, true, true});

    // The batch is made once before the loop, fp32, and kept (randn(2, 3, 224, 224).cuda()).
    const std::uint64_t image = static_cast<std::uint64_t>(config_.image_size);
    const std::uint64_t pixels = SaturatingProduct({n_, 3, image, image});
    program_.AddInput(Tensor("batch", SaturatingProduct({kFp32Size, pixels}), "fp32"));
    std::string x = "batch";
    // With FSDP mixed precision the root casts its floating-point inputs to the compute dtype
    // (fairscale cast_floats_to_right_precision); the stem conv keeps the cast copy. Under
    // autocast the stem conv casts the batch itself and saves that copy (below).
    if (config_.compute_dtype != DType::kFloat32 && !config_.autocast) {
      program_.Run("input cast", 0, {}, {In(x)},
                   {Tensor("batch.cast", SaturatingProduct({e_, pixels}), Dtype())});
      x = "batch.cast";
    }

    program_.Gather(stem_instance);
    x = AddGroups(stem, stem_instance, stem_bns, x);
    program_.EndForward(stem_instance);

    program_.Gather(blocks_instance);
    // checkpoint_wrapper(blocks) inside FSDP(blocks): the region keeps its input, the stem's
    // output.
    if (config_.activation_checkpointing) program_.CheckpointBegin({Keep(x)});
    x = AddGroups(blocks, blocks_instance, block_bns, x);
    // AdaptiveAvgPool2d needs only its input's shape in backward, which gets a new gradient;
    // Flatten returns a view, whose gradient is a view of the head's input gradient.
    program_.Run("blocks.9", static_cast<double>(SaturatingProduct({n_, hd, spatial_, spatial_})),
                 {}, {In(x)}, {Tensor("blocks.9.out", SaturatingProduct({e_, n_, hd}), Dtype())});
    program_.Run(
        "blocks.10", 0, {}, {In("blocks.9.out", InputGrad::kPass)},
        {Tensor("blocks.10.out", SaturatingProduct({e_, n_, hd}), Dtype(), "blocks.9.out")});
    x = "blocks.10.out";
    if (config_.activation_checkpointing) program_.CheckpointEnd();
    program_.EndForward(blocks_instance);

    // Linear(hidden_dim, 10) saves its input (the pooled features) and returns the logits.
    program_.Gather(head_instance);
    ForwardOp& head = program_.Run(
        "head", 2.0 * static_cast<double>(n_ * (hd + 1) * kClasses), {head_instance}, {In(x)},
        {Tensor("head.out", SaturatingProduct({e_, n_, kClasses}), Dtype())}, {Keep(x)});
    head.param_reads = {{"weight", "bias"}};
    AutocastWeight(head, hd * kClasses, (hd + 1) * kClasses);
    program_.EndForward(head_instance);

    // The loss: a mean over the logits, whose backward materialises a gradient of the logits'
    // shape (MeanBackward0: grad.expand(shape) / numel).
    program_.Run("loss", static_cast<double>(n_ * kClasses), {}, {In("head.out")},
                 {Tensor("loss", e_, Dtype())});
    program_.SetLoss("loss");
    return program_.Take();
  }

 private:
  std::string Describe() const {
    return fmt::format(
        "fairscale FSDP memory-test convnet, hidden_dim {}, input {}x3x{}x{}{}{}{}; {}",
        config_.hidden_dim, config_.batch, config_.image_size, config_.image_size,
        config_.activation_checkpointing ? ", checkpointed blocks" : "",
        config_.flatten_parameters ? "" : ", parameters not flattened",
        config_.autocast ? fmt::format(", autocast {}", DTypeName(*config_.autocast)) : "",
        DescribeGenOptions(config_));
  }

  std::string_view Dtype() const { return DTypeName(activation_dtype_); }

  // Conv2d weight out·in·k² plus bias out.
  static Numel ConvWeightNumel(const ConvGroup& group) {
    return SaturatingProduct({group.out_channels, group.in_channels * group.kernel * group.kernel});
  }
  static Numel ConvNumel(const ConvGroup& group) {
    Numel numel = 0;
    return __builtin_add_overflow(ConvWeightNumel(group), group.out_channels, &numel)
               ? std::numeric_limits<Numel>::max()
               : numel;
  }
  // FlattenParamsWrapper: one flat parameter of all the wrapped convs' parameters, whose views
  // they are; without it, each conv's weight and bias (named by their index in the
  // Sequential). Either way a conv reads its weight and bias by those names.
  std::vector<GenParam> Params(const std::vector<ConvGroup>& groups) const {
    std::vector<GenParam> params;
    Numel total = 0;
    for (const ConvGroup& group : groups) {
      if (__builtin_add_overflow(total, ConvNumel(group), &total)) {
        total = std::numeric_limits<Numel>::max();
      }
      const std::string index = group.conv_name.substr(group.conv_name.find('.') + 1);
      // nn.Conv2d's weight is (out, in, k, k), its bias (out): dim 0 is out_channels.
      params.push_back({index + ".weight", ConvWeightNumel(group), {}, group.out_channels});
      params.push_back({index + ".bias", group.out_channels, {}, group.out_channels});
    }
    if (!config_.flatten_parameters) return params;
    std::vector<ParamView> views;
    for (const GenParam& param : params) views.push_back({param.name, param.numel, param.dim0});
    return {{"flat_param_0", total, std::move(views)}};
  }

  // auto_wrap_bn: FSDP(bn, mixed_precision=False, flatten_parameters=False,
  // reshard_after_forward=False), with a process group of its own at #633/#650: weight and
  // bias stay two fp32 parameters.
  std::vector<std::size_t> AddBatchNorms(const std::vector<ConvGroup>& groups) {
    std::vector<std::size_t> instances;
    for (const ConvGroup& group : groups) {
      // Its buffers, alive all run and never sharded: running mean and variance (C fp32 each;
      // fp32 in an instance without mixed precision) and num_batches_tracked (an int64
      // scalar); BatchNorm in training updates them in place.
      const Bytes stats = SaturatingProduct({kFp32Size, group.out_channels});
      program_.AddInput(Tensor(group.bn_name + ".running_mean", stats, "fp32"));
      program_.AddInput(Tensor(group.bn_name + ".running_var", stats, "fp32"));
      program_.AddInput(Tensor(group.bn_name + ".num_batches_tracked", 8, "int64"));
      instances.push_back(
          program_.AddInstance({group.bn_name,
                                {{"weight", group.out_channels, {}, group.out_channels},
                                 {"bias", group.out_channels, {}, group.out_channels}},
                                false,
                                false,
                                true}));
    }
    return instances;
  }

  // Under autocast a conv or linear casts its weight (weight_numel) to the autocast dtype and
  // saves the copy; its backward makes the copy's gradient, and the bias's, in that dtype
  // (param_numel in all) before ToCopyBackward casts them into the parameter's gradient.
  void AutocastWeight(ForwardOp& op, Numel weight_numel, Numel param_numel) const {
    if (!config_.autocast) return;
    op.saves.push_back(Fresh(SaturatingProduct({e_, weight_numel}), Dtype(), "weight cast"));
    op.workspace.push_back(
        Workspace(SaturatingProduct({e_, param_numel}), Dtype(), "weight cast grad"));
  }

  // Each group in forward: the conv (its instance already gathered) saves its input; the BN
  // instance gathers (and stays gathered until its backward); the BN saves the conv's output
  // and its batch statistics; the in-place ReLU overwrites the BN's output and saves it; the
  // next conv saves it as its input. Returns the id of the group's output.
  std::string AddGroups(const std::vector<ConvGroup>& groups, std::size_t conv_instance,
                        const std::vector<std::size_t>& bn_instances, std::string x) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const ConvGroup& group = groups[g];
      const std::uint64_t c = group.out_channels;
      const std::uint64_t elements = SaturatingProduct({n_, c, spatial_, spatial_});
      const double conv_flops =
          2.0 * static_cast<double>(elements) *
          static_cast<double>(group.in_channels * group.kernel * group.kernel);
      const Bytes bytes = SaturatingProduct({e_, elements});
      const std::string conv_out = group.conv_name + ".out";
      const std::string bn_out = group.bn_name + ".out";
      const std::string relu_out = group.relu_name + ".out";
      std::vector<SavedTensor> conv_saves = {Keep(x)};
      // Under autocast the stem conv casts the fp32 batch and saves the copy, not the batch.
      if (config_.autocast && x == "batch") {
        const auto image = static_cast<std::uint64_t>(config_.image_size);
        conv_saves = {Fresh(SaturatingProduct({e_, n_, 3, image, image}), Dtype(), "input cast")};
      }
      ForwardOp& conv = program_.Run(group.conv_name, conv_flops, {conv_instance}, {In(x)},
                                     {Tensor(conv_out, bytes, Dtype())}, std::move(conv_saves));
      const std::string index = group.conv_name.substr(group.conv_name.find('.') + 1);
      conv.param_reads = {{index + ".weight", index + ".bias"}};
      AutocastWeight(conv, ConvWeightNumel(group), ConvNumel(group));
      program_.Gather(bn_instances[g]);
      program_
          .Run(group.bn_name, kBnFlopsPerElement * static_cast<double>(elements), {bn_instances[g]},
               {In(conv_out)}, {Tensor(bn_out, bytes, Dtype())},
               {Keep(conv_out), Fresh(c * kFp32Size, "fp32", "save_mean"),
                Fresh(c * kFp32Size, "fp32", "save_invstd")})
          .param_reads = {{"weight", "bias"}};
      program_.EndForward(bn_instances[g]);
      program_.Run(group.relu_name, kReluFlopsPerElement * static_cast<double>(elements), {},
                   {In(bn_out)}, {Tensor(relu_out, bytes, Dtype(), bn_out)}, {Keep(relu_out)});
      x = relu_out;
    }
    return x;
  }

  const ConvnetConfig& config_;
  const std::uint64_t n_;
  const std::uint64_t spatial_;
  const DType activation_dtype_;
  const Bytes e_;
  ProgramBuilder program_;
};

Status ValidateConfig(const ConvnetConfig& config) {
  const std::pair<const char*, int> positive[] = {{"hidden_dim", config.hidden_dim},
                                                  {"batch", config.batch}};
  for (const auto& [field, value] : positive) {
    if (value < 1) {
      return InvalidArgument(fmt::format("{} must be at least 1 (got {})", field, value));
    }
  }
  // The stem's 3x3 convolution has no padding: a smaller image has no output.
  if (config.image_size < 3) {
    return InvalidArgument(
        fmt::format("image_size must be at least 3 (got {})", config.image_size));
  }
  BUCKETSIM_RETURN_IF_ERROR(ValidateAutocast(config.autocast));
  return ValidateGenOptions(config);
}

class ConvnetPreset : public Preset {
 public:
  std::string_view name() const override { return "fairscale-convnet"; }
  std::string_view summary() const override {
    return "The conv model of fairscale's FSDP memory test: BN wrapped by auto_wrap_bn, stem, "
           "blocks, head, root";
  }
  std::string_view example() const override {
    return "bucketsim gen fairscale-convnet --hidden-dim 128 --groups per-instance -o convnet.json";
  }
  std::vector<PresetParam> Params() override {
    ConvnetConfig& c = config_;
    std::vector<PresetParam> params;
    params.push_back(
        IntParam("hidden-dim", "Channels of the three block convs (hidden_dim)", c.hidden_dim));
    params.push_back(IntParam("batch", "Images per batch", c.batch));
    params.push_back(IntParam("image-size", "Input height and width", c.image_size));
    params.push_back(BoolParam("activation-checkpointing",
                               "Wrap blocks in checkpoint_wrapper (the test's ckpt configs)",
                               c.activation_checkpointing));
    params.push_back(BoolParam("flatten-parameters",
                               "One flat parameter per instance (fairscale's flatten_parameters); "
                               "false: each weight and bias its own",
                               c.flatten_parameters));
    params.push_back(AutocastParam(c.autocast));
    for (PresetParam& param : GenOptionParams(c)) params.push_back(std::move(param));
    return params;
  }
  Result<ModelProgram> Program() const override { return ConvnetProgram(config_); }
  const GenOptions& options() const override { return config_; }

 private:
  ConvnetConfig config_;
};

}  // namespace

Result<ModelProgram> ConvnetProgram(const ConvnetConfig& config) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateConfig(config));
  return ConvnetBuilder(config).Build();
}

Status GenerateConvnet(const ConvnetConfig& config, EventSink& sink) {
  Result<ModelProgram> program = ConvnetProgram(config);
  if (!program.ok()) return program.status();
  return EmitFsdpTrace(*program, config, sink);
}

std::unique_ptr<Preset> MakeConvnetPreset() { return std::make_unique<ConvnetPreset>(); }

}  // namespace bucketsim
