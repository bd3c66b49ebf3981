#include "gen/convnet_preset.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "gen/fsdp_program.h"

namespace bucketsim {
namespace {

constexpr Bytes kFp32Size = 4;
constexpr std::uint64_t kStemChannels = 64;
constexpr std::uint64_t kClasses = 10;
// Elementwise work of a BatchNorm and the in-place ReLU after it, in FLOPs per element: an
// order of magnitude for the time model (both are memory-bound).
constexpr double kBnReluFlopsPerElement = 5;

// One Conv2d / BatchNorm2d / ReLU(inplace) group of the model.
struct ConvGroup {
  std::string conv_name;  // module path of the conv ("stem.0"); the BN is the next index
  std::string bn_name;    // "stem.1": its FSDP instance
  std::uint64_t in_channels, out_channels, kernel;
};

class ConvnetBuilder {
 public:
  explicit ConvnetBuilder(const ConvnetConfig& config)
      : config_(config),
        n_(static_cast<std::uint64_t>(config.batch)),
        // stem: k3 without padding; the blocks' k5 convs have padding 2 and keep the size.
        spatial_(static_cast<std::uint64_t>(config.image_size) - 2),
        e_(ElementSize(config.compute_dtype)) {}

  FsdpModel Build() {
    const auto hd = static_cast<std::uint64_t>(config_.hidden_dim);
    const std::vector<ConvGroup> stem = {{"stem.0", "stem.1", 3, kStemChannels, 3}};
    const std::vector<ConvGroup> blocks = {{"blocks.0", "blocks.1", kStemChannels, hd, 5},
                                           {"blocks.3", "blocks.4", hd, hd, 5},
                                           {"blocks.6", "blocks.7", hd, hd, 5}};
    model_.description = Describe();

    // The instances in named_modules() order of the root: root, stem, its BN, blocks, their
    // BNs, head. The root owns no parameters and, as the root, never reshards.
    AddInstance("root", {}, true, false);
    const std::size_t stem_instance = AddInstance("stem", {Flat(ConvNumels(stem))}, true, true);
    std::vector<std::size_t> stem_bns = AddBatchNorms(stem);
    const std::size_t blocks_instance =
        AddInstance("blocks", {Flat(ConvNumels(blocks))}, true, true);
    std::vector<std::size_t> block_bns = AddBatchNorms(blocks);
    const std::size_t head_instance =
        AddInstance("head", {{"flat_param_0", SaturatingProduct({hd + 1, kClasses})}}, true, true);

    // The batch is made once before the loop, fp32, and kept (randn(2, 3, 224, 224).cuda()).
    const std::uint64_t image = static_cast<std::uint64_t>(config_.image_size);
    model_.inputs = {SaturatingProduct({kFp32Size, n_, 3, image, image})};
    // With mixed precision the root casts its floating-point inputs to the compute dtype
    // (fairscale cast_floats_to_right_precision); the stem conv keeps the cast copy.
    if (config_.compute_dtype != DType::kFloat32) {
      Run("input cast", 0, {SaturatingProduct({e_, n_, 3, image, image})}, {});
    }

    Gather(stem_instance);
    AddGroups(stem, stem_instance, stem_bns);
    End(stem_instance);

    Gather(blocks_instance);
    // checkpoint_wrapper(blocks) inside FSDP(blocks): the region keeps its input, the stem's
    // output, which the stem keeps anyway, so it adds no allocation of its own.
    if (config_.activation_checkpointing) Push(OpKind::kCheckpointBegin, blocks_instance);
    AddGroups(blocks, blocks_instance, block_bns);
    // AdaptiveAvgPool2d needs only its input's shape in backward; its output (flattened, a
    // view) is saved by the head's Linear and is counted there.
    Run("blocks.9", static_cast<double>(SaturatingProduct({n_, hd, spatial_, spatial_})), {}, {});
    if (config_.activation_checkpointing) Push(OpKind::kCheckpointEnd, blocks_instance);
    End(blocks_instance);

    // Linear(hidden_dim, 10) saves its input (the pooled features) and returns the logits.
    Gather(head_instance);
    Run("head", 2.0 * static_cast<double>(n_ * (hd + 1) * kClasses),
        {SaturatingProduct({e_, n_, hd}), SaturatingProduct({e_, n_, kClasses})}, {head_instance});
    End(head_instance);
    return std::move(model_);
  }

 private:
  std::string Describe() const {
    return fmt::format("fairscale FSDP memory-test convnet, hidden_dim {}, input {}x3x{}x{}{}; {}",
                       config_.hidden_dim, config_.batch, config_.image_size, config_.image_size,
                       config_.activation_checkpointing ? ", checkpointed blocks" : "",
                       DescribeGenOptions(config_));
  }

  // Conv2d weight out·in·k² plus bias out.
  static Numel ConvNumel(const ConvGroup& group) {
    return SaturatingProduct(
        {group.out_channels, group.in_channels * group.kernel * group.kernel + 1});
  }
  static std::vector<Numel> ConvNumels(const std::vector<ConvGroup>& groups) {
    std::vector<Numel> numels;
    for (const ConvGroup& group : groups) numels.push_back(ConvNumel(group));
    return numels;
  }
  // FlattenParamsWrapper: one flat parameter of all the wrapped convs' parameters.
  static GenParam Flat(const std::vector<Numel>& numels) {
    Numel total = 0;
    for (Numel numel : numels) {
      if (__builtin_add_overflow(total, numel, &total)) total = std::numeric_limits<Numel>::max();
    }
    return {"flat_param_0", total};
  }

  std::size_t AddInstance(std::string name, std::vector<GenParam> params, bool mixed_precision,
                          bool reshard) {
    model_.instances.push_back({std::move(name), std::move(params), mixed_precision, reshard});
    return model_.instances.size() - 1;
  }

  // auto_wrap_bn: FSDP(bn, mixed_precision=False, flatten_parameters=False,
  // reshard_after_forward=False): weight and bias stay two fp32 parameters.
  std::vector<std::size_t> AddBatchNorms(const std::vector<ConvGroup>& groups) {
    std::vector<std::size_t> instances;
    for (const ConvGroup& group : groups) {
      instances.push_back(
          AddInstance(group.bn_name, {{"weight", group.out_channels}, {"bias", group.out_channels}},
                      false, false));
    }
    return instances;
  }

  // Each group in forward: the conv (its instance already gathered) saves its input, which the
  // previous group keeps anyway, and its output is saved by the BN; the BN instance gathers
  // (and stays gathered until its backward); the BN saves its batch mean and inverse std (C
  // fp32 each) and its output, which the in-place ReLU overwrites and saves, and the next conv
  // saves as its input.
  void AddGroups(const std::vector<ConvGroup>& groups, std::size_t conv_instance,
                 const std::vector<std::size_t>& bn_instances) {
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const ConvGroup& group = groups[g];
      const std::uint64_t c = group.out_channels;
      const std::uint64_t elements = SaturatingProduct({n_, c, spatial_, spatial_});
      const double conv_flops =
          2.0 * static_cast<double>(elements) *
          static_cast<double>(group.in_channels * group.kernel * group.kernel);
      Run(group.conv_name, conv_flops, {SaturatingProduct({e_, elements})}, {conv_instance});
      Gather(bn_instances[g]);
      Run(group.bn_name, kBnReluFlopsPerElement * static_cast<double>(elements),
          {SaturatingProduct({e_, elements}), c * kFp32Size, c * kFp32Size}, {bn_instances[g]});
      End(bn_instances[g]);
    }
  }

  void Push(OpKind kind, std::size_t instance) {
    ForwardOp op;
    op.kind = kind;
    op.instance = instance;
    model_.forward.push_back(std::move(op));
  }
  void Gather(std::size_t instance) { Push(OpKind::kGather, instance); }
  void End(std::size_t instance) { Push(OpKind::kEndForward, instance); }
  void Run(std::string name, double flops, std::vector<Bytes> activations,
           std::vector<std::size_t> uses) {
    ForwardOp op;
    op.kind = OpKind::kRun;
    op.name = std::move(name);
    op.flops = flops;
    op.activations = std::move(activations);
    op.uses = std::move(uses);
    model_.forward.push_back(std::move(op));
  }

  const ConvnetConfig& config_;
  const std::uint64_t n_;
  const std::uint64_t spatial_;
  const Bytes e_;
  FsdpModel model_;
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
    for (PresetParam& param : GenOptionParams(c)) params.push_back(std::move(param));
    return params;
  }
  Status Generate(EventSink& sink) const override { return GenerateConvnet(config_, sink); }

 private:
  ConvnetConfig config_;
};

}  // namespace

Status GenerateConvnet(const ConvnetConfig& config, EventSink& sink) {
  BUCKETSIM_RETURN_IF_ERROR(ValidateConfig(config));
  return EmitFsdpTrace(ConvnetBuilder(config).Build(), config, sink);
}

std::unique_ptr<Preset> MakeConvnetPreset() { return std::make_unique<ConvnetPreset>(); }

}  // namespace bucketsim
