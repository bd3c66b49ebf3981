// The options every preset shares, the parameter tables and the preset registry.
#include "gen/gen_options.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "gen/preset.h"

namespace bucketsim {
namespace {

TEST(GenOptions, ReduceDTypeFollowsComputeUnlessSetOrFp32ReduceScatter) {
  GenOptions options;
  options.compute_dtype = DType::kFloat16;
  EXPECT_EQ(options.ReduceDType(), DType::kFloat16);
  options.reduce_dtype = DType::kFloat32;
  EXPECT_EQ(options.ReduceDType(), DType::kFloat32);
  options.reduce_dtype.reset();
  options.fairscale.fp32_reduce_scatter = true;
  EXPECT_EQ(options.ReduceDType(), DType::kFloat32);
}

TEST(GenOptions, HsdpShardGroupIsTheRanksConsecutiveBlock) {
  GenOptions options;
  options.world_size = 8;
  options.group_layout = GroupLayout::kHsdp;
  options.hsdp_shard_size = 4;
  options.rank = 5;
  EXPECT_EQ(options.ShardGroupRanks(), (std::vector<int>{4, 5, 6, 7}));
  options.rank = 3;
  EXPECT_EQ(options.ShardGroupRanks(), (std::vector<int>{0, 1, 2, 3}));
  options.group_layout = GroupLayout::kShared;
  options.hsdp_shard_size = 0;
  EXPECT_EQ(options.ShardGroupRanks().size(), 8u);
}

TEST(GenOptions, InvalidOptionsNameTheField) {
  struct Case {
    void (*mutate)(GenOptions&);
    const char* field;
  };
  const Case cases[] = {
      {[](GenOptions& o) { o.iterations = 0; }, "iterations"},
      {[](GenOptions& o) { o.world_size = 0; }, "world_size"},
      {[](GenOptions& o) { o.rank = 8; }, "rank"},
      {[](GenOptions& o) { o.group_layout = GroupLayout::kHsdp; }, "hsdp_shard_size"},
      {[](GenOptions& o) {
         o.group_layout = GroupLayout::kHsdp;
         o.hsdp_shard_size = 3;
       },
       "hsdp_shard_size"},
      {[](GenOptions& o) { o.hsdp_shard_size = 2; }, "hsdp_shard_size"},  // not hsdp
      {[](GenOptions& o) { o.reduce_dtype = DType::kFloat16; }, "reduce_dtype"},
      {[](GenOptions& o) {
         o.fairscale.fp32_reduce_scatter = true;
         o.reduce_dtype = DType::kBFloat16;
       },
       "fp32_reduce_scatter"},
      {[](GenOptions& o) { o.device_tflops = -1; }, "device_tflops"},
  };
  for (const Case& c : cases) {
    GenOptions options;
    c.mutate(options);
    Status status = ValidateGenOptions(options);
    EXPECT_FALSE(status.ok()) << c.field;
    EXPECT_NE(status.message().find(c.field), std::string::npos) << status.message();
  }
  EXPECT_TRUE(ValidateGenOptions(GenOptions{}).ok());
}

TEST(PresetParam, ParsesAndRejectsValues) {
  GenOptions options;
  std::vector<PresetParam> params = GenOptionParams(options);
  auto find = [&](const std::string& name) -> PresetParam& {
    for (PresetParam& p : params) {
      if (p.name == name) return p;
    }
    ADD_FAILURE() << name;
    return params.front();
  };
  EXPECT_EQ(find("world-size").get(), "8");
  EXPECT_TRUE(find("world-size").set("64").ok());
  EXPECT_EQ(options.world_size, 64);
  EXPECT_EQ(find("world-size").set("6x").message(), "'6x' is not an integer");
  EXPECT_EQ(find("world-size").set("").message(), "'' is not an integer");
  EXPECT_EQ(find("world-size").set("99999999999").message(),
            "'99999999999' is out of range for an integer");
  EXPECT_EQ(find("bucket-cap-mb").set("0.25").ok(), true);
  EXPECT_EQ(options.bucket_cap_mb, 0.25);
  EXPECT_EQ(find("bucket-cap-mb").set("inf").message(), "'inf' is not a finite number");
  EXPECT_EQ(find("groups").set("per-group").message(),
            "'per-group' is not one of shared, per-instance, shared-bn-own or hsdp");
  EXPECT_TRUE(find("groups").set("hsdp").ok());
  EXPECT_EQ(options.group_layout, GroupLayout::kHsdp);
  EXPECT_EQ(find("reduce-dtype").get(), "param-dtype");
  EXPECT_TRUE(find("reduce-dtype").set("fp32").ok());
  EXPECT_EQ(options.reduce_dtype, DType::kFloat32);
  EXPECT_EQ(find("param-dtype").set("fp64").message(), "'fp64' is not one of fp32, bf16 or fp16");
  EXPECT_TRUE(find("reshard-after-forward").set("false").ok());
  EXPECT_FALSE(options.reshard_after_forward);
  EXPECT_EQ(find("reshard-after-forward").set("maybe").message(),
            "'maybe' is not a boolean (true or false)");
  EXPECT_EQ(find("optimizer").ValueHint(), "sgd|sgd-momentum|adam|adamw");
  EXPECT_EQ(find("iterations").ValueHint(), "INT");
}

// The parameters of one GenOptions, looked up by flag name.
class OptionFlags {
 public:
  OptionFlags() : params_(GenOptionParams(options)) {}
  Status Set(const std::string& name, const std::string& value) {
    for (PresetParam& p : params_) {
      if (p.name == name) return p.set(value);
    }
    return InvalidArgument("no --" + name);
  }
  std::string Get(const std::string& name) {
    for (PresetParam& p : params_) {
      if (p.name == name) return p.get();
    }
    return "no --" + name;
  }
  GenOptions options;

 private:
  std::vector<PresetParam> params_;
};

// PyTorch's FSDP has no MixedPrecision by default and one process group for every unit; an
// explicit --param-dtype or --groups wins in either order.
TEST(GenOptions, TorchImplementationsDefaultToFp32AndOneGroupWhateverTheFlagOrder) {
  OptionFlags plain;
  ASSERT_TRUE(plain.Set("fsdp-impl", "fsdp1").ok());
  EXPECT_EQ(plain.options.compute_dtype, DType::kFloat32);
  EXPECT_EQ(plain.options.group_layout, GroupLayout::kShared);
  OptionFlags after;
  ASSERT_TRUE(after.Set("fsdp-impl", "fsdp2").ok());
  ASSERT_TRUE(after.Set("param-dtype", "bf16").ok());
  ASSERT_TRUE(after.Set("groups", "hsdp").ok());
  EXPECT_EQ(after.options.compute_dtype, DType::kBFloat16);
  EXPECT_EQ(after.options.group_layout, GroupLayout::kHsdp);
  OptionFlags before;
  ASSERT_TRUE(before.Set("param-dtype", "bf16").ok());
  ASSERT_TRUE(before.Set("fsdp-impl", "fsdp1").ok());
  EXPECT_EQ(before.options.compute_dtype, DType::kBFloat16);
  OptionFlags fairscale;
  ASSERT_TRUE(fairscale.Set("fsdp-impl", "fairscale").ok());
  EXPECT_EQ(fairscale.options.compute_dtype, DType::kBFloat16);
  EXPECT_EQ(fairscale.options.group_layout, GroupLayout::kPerInstance);
}

// torch's optimizer implementation for the FSDP implementation (for-loop for fairscale,
// foreach for PyTorch's FSDP on CUDA) and its weight decay for the optimizer (AdamW 0.01),
// unless given, whatever the order of the flags; a negative decay is refused as torch does.
TEST(GenOptions, OptimizerDefaultsAreTorchsWhateverTheFlagOrder) {
  OptionFlags fairscale;
  EXPECT_EQ(fairscale.Get("optimizer-impl"), "for-loop");
  EXPECT_EQ(fairscale.Get("weight-decay"), "0");
  OptionFlags torch;
  ASSERT_TRUE(torch.Set("fsdp-impl", "fsdp2").ok());
  ASSERT_TRUE(torch.Set("optimizer", "adamw").ok());
  EXPECT_EQ(torch.options.optimizer_impl, OptimizerImpl::kForeach);
  EXPECT_EQ(torch.options.weight_decay, 0.01);
  ASSERT_TRUE(torch.Set("optimizer", "adam").ok());
  EXPECT_EQ(torch.options.weight_decay, 0);
  OptionFlags given;
  ASSERT_TRUE(given.Set("optimizer-impl", "fused").ok());
  ASSERT_TRUE(given.Set("weight-decay", "0").ok());
  ASSERT_TRUE(given.Set("fsdp-impl", "fsdp1").ok());
  ASSERT_TRUE(given.Set("optimizer", "adamw").ok());
  EXPECT_EQ(given.options.optimizer_impl, OptimizerImpl::kFused);
  EXPECT_EQ(given.options.weight_decay, 0);
  EXPECT_EQ(given.Set("optimizer-impl", "loop").message(),
            "'loop' is not one of for-loop, foreach or fused");
  GenOptions direct;
  ASSERT_TRUE(SetGenOption(direct, "optimizer-impl", "foreach").ok());
  EXPECT_EQ(direct.optimizer_impl, OptimizerImpl::kForeach);
  EXPECT_TRUE(direct.optimizer_impl_given);
  EXPECT_EQ(SetGenOption(direct, "optimiser", "adam").message(), "no option --optimiser");
  given.options.weight_decay = -0.1;
  EXPECT_NE(ValidateGenOptions(given.options).message().find("weight_decay"), std::string::npos);
}

TEST(GenOptions, HsdpShapeAndReshardToNRanks) {
  OptionFlags flags;
  ASSERT_TRUE(flags.Set("world-size", "8").ok());
  ASSERT_TRUE(flags.Set("hsdp-shape", "2,4").ok());
  EXPECT_EQ(flags.options.group_layout, GroupLayout::kHsdp);
  EXPECT_EQ(flags.options.hsdp_shard_size, 4);
  EXPECT_EQ(flags.Get("hsdp-shape"), "2,4");
  EXPECT_EQ(flags.Set("hsdp-shape", "2x4").message(), "'2x4' is not R,S (replicas,shard size)");
  EXPECT_EQ(flags.Set("hsdp-shape", "2,1").message(), "'2,1' is not R,S with R >= 1 and S >= 2");
  ASSERT_TRUE(flags.Set("hsdp-shape", "3,4").ok());
  EXPECT_EQ(ValidateGenOptions(flags.options).message(),
            "--hsdp-shape 3,4 is 12 ranks, but world_size is 8");
  ASSERT_TRUE(flags.Set("reshard-after-forward", "2").ok());
  EXPECT_EQ(flags.options.reshard_after_forward_ranks, 2);
  EXPECT_EQ(flags.Get("reshard-after-forward"), "2");
  ASSERT_TRUE(flags.Set("reshard-after-forward", "false").ok());
  EXPECT_EQ(flags.options.reshard_after_forward_ranks, 0);
  EXPECT_FALSE(flags.options.reshard_after_forward);
}

// An option of one implementation under another is an error naming both.
TEST(GenOptions, ImplementationOptionsAreRefusedUnderAnotherImplementation) {
  const std::vector<std::pair<std::vector<std::pair<std::string, std::string>>, std::string>>
      cases = {
          {{{"sharding-strategy", "SHARD_GRAD_OP"}},
           "--sharding-strategy is an option of --fsdp-impl fsdp1 (this is fairscale)"},
          {{{"fsdp-impl", "fsdp2"}, {"backward-prefetch", "post"}},
           "--backward-prefetch is an option of --fsdp-impl fsdp1 (this is fsdp2)"},
          {{{"fsdp-impl", "fsdp1"}, {"reshard-after-forward", "4"}},
           "--reshard-after-forward=N is an option of --fsdp-impl fsdp2 (this is fsdp1)"},
          {{{"offload-params", "true"}},
           "--offload-params is an option of --fsdp-impl fsdp1 or fsdp2 (this is fairscale)"},
          {{{"fsdp-impl", "fsdp1"}, {"output-dtype", "fp32"}},
           "--output-dtype is an option of --fsdp-impl fsdp2 (this is fsdp1)"},
          {{{"fsdp-impl", "fsdp1"}, {"cast-forward-inputs", "off"}},
           "--cast-forward-inputs is an option of --fsdp-impl fsdp2 (this is fsdp1)"},
          {{{"modules-to-forward-prefetch", "2"}},
           "--modules-to-forward-prefetch is an option of --fsdp-impl fsdp2 (this is fairscale)"},
          {{{"fsdp-impl", "fsdp1"}, {"modules-to-backward-prefetch", "1"}},
           "--modules-to-backward-prefetch is an option of --fsdp-impl fsdp2 (this is fsdp1)"},
          {{{"fsdp-impl", "fsdp2"}, {"modules-to-forward-prefetch", "-1"}},
           "--modules-to-forward-prefetch -1: expected a count of units, 0 or more"},
          {{{"fsdp-impl", "fsdp1"}, {"fp32-reduce-scatter", "true"}},
           "--fp32-reduce-scatter is fairscale's; with --fsdp-impl fsdp1 say --reduce-dtype fp32"},
          {{{"fsdp-impl", "fsdp1"}, {"groups", "per-instance"}},
           "--groups per-instance is fairscale's; PyTorch's fsdp1 uses one process group for "
           "every unit (--groups shared) or a 2-D mesh (--hsdp-shape R,S)"},
          {{{"fsdp-impl", "fsdp1"}, {"sharding-strategy", "HYBRID_SHARD"}},
           "HYBRID_SHARD needs its replicate and shard groups: give --sharding-strategy "
           "HYBRID_SHARD with --hsdp-shape R,S (R replicas of S ranks)"},
      };
  for (const auto& [flags, message] : cases) {
    OptionFlags options;
    for (const auto& [name, value] : flags) ASSERT_TRUE(options.Set(name, value).ok()) << name;
    EXPECT_EQ(ValidateGenOptions(options.options).message(), message);
  }
}

TEST(GenOptions, TorchSettingIsPyTorchsOwnSpelling) {
  OptionFlags fsdp1;
  ASSERT_TRUE(fsdp1.Set("fsdp-impl", "fsdp1").ok());
  ASSERT_TRUE(fsdp1.Set("param-dtype", "bf16").ok());
  ASSERT_TRUE(fsdp1.Set("reduce-dtype", "fp32").ok());
  ASSERT_TRUE(fsdp1.Set("backward-prefetch", "post").ok());
  EXPECT_EQ(TorchFsdpSetting(fsdp1.options),
            "FullyShardedDataParallel(module, sharding_strategy=ShardingStrategy.FULL_SHARD, "
            "backward_prefetch=BackwardPrefetch.BACKWARD_POST, forward_prefetch=False, "
            "limit_all_gathers=True, use_orig_params=False, "
            "mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, "
            "reduce_dtype=torch.float32))");
  OptionFlags fsdp2;
  ASSERT_TRUE(fsdp2.Set("fsdp-impl", "fsdp2").ok());
  ASSERT_TRUE(fsdp2.Set("world-size", "8").ok());
  ASSERT_TRUE(fsdp2.Set("reshard-after-forward", "false").ok());
  ASSERT_TRUE(fsdp2.Set("hsdp-shape", "2,4").ok());
  EXPECT_EQ(TorchFsdpSetting(fsdp2.options),
            "fully_shard(module, reshard_after_forward=False, mesh=init_device_mesh(\"cuda\", "
            "(2, 4)))");
  EXPECT_EQ(TorchFsdpSetting(GenOptions{}), "");
}

TEST(Presets, RegistryNamesAndUniqueParameters) {
  std::vector<std::string> names;
  for (const std::unique_ptr<Preset>& preset : MakePresets()) {
    names.emplace_back(preset->name());
    std::set<std::string> seen;
    for (const PresetParam& param : preset->Params()) {
      EXPECT_TRUE(seen.insert(param.name).second) << preset->name() << " --" << param.name;
      EXPECT_FALSE(param.meaning.empty()) << param.name;
    }
    EXPECT_TRUE(seen.count("world-size")) << preset->name();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"transformer", "fairscale-convnet"}));
}

// A preset's parameters write its own configuration: setting one and generating shows it.
TEST(Presets, ParametersDriveGeneration) {
  class Counter : public EventSink {
   public:
    Status OnHeader(const TraceHeader& header) override {
      world_size = header.world_size;
      instances = header.units.size();
      return Status::Ok();
    }
    Status OnEvent(const Event&) override { return Status::Ok(); }
    Status OnEnd() override { return Status::Ok(); }
    int world_size = 0;
    std::size_t instances = 0;
  };
  for (const std::unique_ptr<Preset>& preset : MakePresets()) {
    const std::map<std::string, std::string> values = {{"world-size", "4"},
                                                       {"layers", "3"},
                                                       {"iterations", "1"},
                                                       {"seq", "16"},
                                                       {"image-size", "8"}};
    for (PresetParam& param : preset->Params()) {
      auto it = values.find(param.name);
      if (it != values.end()) {
        ASSERT_TRUE(param.set(it->second).ok());
      }
    }
    Counter counter;
    ASSERT_TRUE(preset->Generate(counter).ok()) << preset->name();
    EXPECT_EQ(counter.world_size, 4);
    EXPECT_EQ(counter.instances, preset->name() == "transformer" ? 5u : 8u);
  }
}

}  // namespace
}  // namespace bucketsim
