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
  options.fp32_reduce_scatter = true;
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
         o.fp32_reduce_scatter = true;
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
  EXPECT_EQ(find("optimizer").ValueHint(), "sgd|sgd-momentum|adam");
  EXPECT_EQ(find("iterations").ValueHint(), "INT");
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
      instances = header.fsdp.size();
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
