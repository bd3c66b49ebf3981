#include "policy/policy_spec.h"

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

TEST(ParsePolicySpec, NamedPresets) {
  auto always = ParsePolicySpec("always-allocated");
  ASSERT_TRUE(always.ok());
  EXPECT_EQ(always->lifetime, Lifetime::kAlways);
  EXPECT_EQ(always->key, KeyMode::kIdentity);
  EXPECT_FALSE(always->cap_mb.has_value());

  auto dedup = ParsePolicySpec("per-group-dedup");
  ASSERT_TRUE(dedup.ok());
  EXPECT_EQ(dedup->lifetime, Lifetime::kBackward);
  EXPECT_EQ(dedup->key, KeyMode::kMembers);

  auto unbucketed = ParsePolicySpec("unbucketed");
  ASSERT_TRUE(unbucketed.ok());
  EXPECT_EQ(unbucketed->cap_mb, 0.0);
}

TEST(ParsePolicySpec, GeneralFormWithDefaultsForMissingParts) {
  auto spec = ParsePolicySpec("lifetime=always,key=members,cap=50");
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->lifetime, Lifetime::kAlways);
  EXPECT_EQ(spec->key, KeyMode::kMembers);
  EXPECT_EQ(spec->cap_mb, 50.0);
  EXPECT_EQ(spec->Canonical(50), "lifetime=always,key=members,cap=50");

  auto partial = ParsePolicySpec("key=members");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->lifetime, Lifetime::kBackward);
  EXPECT_EQ(partial->Canonical(0.25), "lifetime=backward,key=members,cap=0.25");
}

TEST(ParsePolicySpec, RejectsUnknownNamesAndParts) {
  auto unknown = ParsePolicySpec("always");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("unknown policy 'always'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("backward-only"), std::string::npos);

  EXPECT_FALSE(ParsePolicySpec("lifetime=forever").ok());
  EXPECT_FALSE(ParsePolicySpec("key=group").ok());
  EXPECT_FALSE(ParsePolicySpec("cap=lots").ok());
  EXPECT_FALSE(ParsePolicySpec("cap=").ok());
  EXPECT_FALSE(ParsePolicySpec("colour=blue").ok());
  EXPECT_FALSE(ParsePolicySpec("lifetime=always,members").ok());
}

TEST(DefaultPolicies, AreTheThreeSeedPoliciesAndUnbucketed) {
  std::vector<std::string> names;
  for (const PolicySpec& spec : DefaultPolicies()) names.push_back(spec.name);
  EXPECT_EQ(names, (std::vector<std::string>{"always-allocated", "backward-only", "per-group-dedup",
                                             "unbucketed"}));
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

TEST(ParsePolicySpec, FrameworkPresetsTakeTheirDefaults) {
  auto ddp = ParsePolicySpec("ddp");
  ASSERT_TRUE(ddp.ok());
  EXPECT_EQ(ddp->strategy, Strategy::kDdp);
  EXPECT_FALSE(ddp->cap_mb.has_value());  // bucket_cap_mb from the command line or the trace
  EXPECT_EQ(ddp->Canonical(25), "strategy=ddp,cap=25,first_cap=1,grad_as_view=0");

  auto zero12 = ParsePolicySpec("zero12");
  ASSERT_TRUE(zero12.ok());
  EXPECT_EQ(zero12->cap_mb, 0.0);  // no MiB cap: reports show no "@ MB"
  EXPECT_EQ(zero12->Canonical(0), "strategy=zero12,reduce_bucket_size=500000000,overlap_comm=0");
  EXPECT_EQ(ParsePolicySpec("zero3")->Canonical(0), "strategy=zero3,reduce_bucket_size=500000000");
  EXPECT_EQ(ParsePolicySpec("megatron")->Canonical(0),
            "strategy=megatron,bucket_size=auto,distributed_optimizer=1,overlap_grad_reduce=0,"
            "pad_for_high_nccl_busbw=0");
  EXPECT_EQ(ParsePolicySpec("fsdp2")->Canonical(0), "strategy=fsdp2,inflight=1");
  EXPECT_EQ(ParsePolicySpec("hold-until-end")->Canonical(0), "strategy=fsdp2,inflight=0");
  EXPECT_EQ(ParsePolicySpec("fsdp1")->Canonical(0), "strategy=fsdp1");
  EXPECT_EQ(ParsePolicySpec("fsdp1,cap=5").status().message(),
            "policy: unknown part 'cap': strategy fsdp1 takes no parts");
}

TEST(ParsePolicySpec, PartsAfterAPresetOverrideIt) {
  auto ddp = ParsePolicySpec("ddp,cap=50,first_cap=0.5,grad_as_view=1");
  ASSERT_TRUE(ddp.ok());
  EXPECT_EQ(ddp->name, "ddp,cap=50,first_cap=0.5,grad_as_view=1");
  EXPECT_EQ(ddp->Canonical(50), "strategy=ddp,cap=50,first_cap=0.5,grad_as_view=1");

  auto zero = ParsePolicySpec("zero12,reduce_bucket_size=2e8,overlap_comm=1");
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(zero->reduce_bucket_size, 200'000'000u);
  EXPECT_TRUE(zero->overlap_comm);

  auto megatron = ParsePolicySpec("megatron,bucket_size=1e6,overlap_grad_reduce=1");
  ASSERT_TRUE(megatron.ok());
  EXPECT_EQ(megatron->bucket_size, 1'000'000u);
  EXPECT_TRUE(megatron->overlap_grad_reduce);

  auto backward = ParsePolicySpec("backward-only,cap=50");
  ASSERT_TRUE(backward.ok());
  EXPECT_EQ(backward->Canonical(50), "lifetime=backward,key=identity,cap=50");
}

TEST(ParsePolicySpec, StrategyKeyNamesTheFrameworkInTheGeneralForm) {
  auto fsdp2 = ParsePolicySpec("inflight=2,strategy=fsdp2");
  ASSERT_TRUE(fsdp2.ok());
  EXPECT_EQ(fsdp2->strategy, Strategy::kFsdp2);
  EXPECT_EQ(fsdp2->inflight, 2);
  EXPECT_EQ(fsdp2->cap_mb, 0.0);

  auto fairscale = ParsePolicySpec("strategy=fairscale,lifetime=always");
  ASSERT_TRUE(fairscale.ok());
  EXPECT_EQ(fairscale->Canonical(25), "lifetime=always,key=identity,cap=25");
}

TEST(ParsePolicySpec, RejectsKeysOfAnotherStrategy) {
  auto foreign = ParsePolicySpec("ddp,overlap_comm=1");
  ASSERT_FALSE(foreign.ok());
  EXPECT_NE(foreign.status().message().find("unknown part 'overlap_comm' for strategy ddp"),
            std::string::npos);
  EXPECT_NE(foreign.status().message().find("first_cap="), std::string::npos);
  EXPECT_FALSE(ParsePolicySpec("fsdp2,cap=25").ok());
  EXPECT_FALSE(ParsePolicySpec("zero3,overlap_comm=1").ok());
  EXPECT_FALSE(ParsePolicySpec("strategy=ddp,lifetime=always").ok());
  EXPECT_FALSE(ParsePolicySpec("ddp,strategy=zero12").ok());
  EXPECT_FALSE(ParsePolicySpec("strategy=deepspeed").ok());
  EXPECT_FALSE(ParsePolicySpec("zero12,reduce_bucket_size=0").ok());
  EXPECT_FALSE(ParsePolicySpec("zero12,reduce_bucket_size=1.5").ok());
  EXPECT_FALSE(ParsePolicySpec("ddp,grad_as_view=yes").ok());
  EXPECT_FALSE(ParsePolicySpec("fsdp2,inflight=-1").ok());
}

}  // namespace
}  // namespace bucketsim

namespace bucketsim {
namespace {

TEST(PolicySpec, CanonicalParsesBackToTheSameSetting) {
  for (const char* text : {"backward-only", "per-group-dedup", "ddp,grad_as_view=1", "zero12",
                           "zero3,reduce_bucket_size=1000", "megatron", "megatron,bucket_size=5",
                           "fsdp1", "fsdp2", "hold-until-end"}) {
    Result<PolicySpec> spec = ParsePolicySpec(text);
    ASSERT_TRUE(spec.ok()) << text;
    Result<PolicySpec> again = ParsePolicySpec(spec->Canonical(25));
    ASSERT_TRUE(again.ok()) << spec->Canonical(25);
    EXPECT_EQ(again->Canonical(25), spec->Canonical(25));
    EXPECT_EQ(FrameworkSetting(*again, 25), FrameworkSetting(*spec, 25));
  }
}

TEST(FrameworkSetting, NamesEachFrameworksOwnKnob) {
  // fairscale's class, named as fairscale's: PyTorch's FullyShardedDataParallel has no
  // bucket_cap_mb.
  EXPECT_EQ(FrameworkSetting(*ParsePolicySpec("backward-only"), 25),
            "fairscale.nn.FullyShardedDataParallel(bucket_cap_mb=25)");
  EXPECT_EQ(FrameworkSetting(*ParsePolicySpec("fsdp1"), 0),
            "torch.distributed.fsdp.FullyShardedDataParallel(...)");
  EXPECT_EQ(FrameworkSetting(*ParsePolicySpec("ddp,first_cap=2"), 50),
            "DistributedDataParallel(bucket_cap_mb=50, gradient_as_bucket_view=False); "
            "dist._DEFAULT_FIRST_BUCKET_BYTES = 2097152");
  EXPECT_EQ(FrameworkSetting(*ParsePolicySpec("zero12,overlap_comm=1,reduce_bucket_size=2e8"), 0),
            "zero_optimization: {stage: 2, reduce_bucket_size: 200000000, overlap_comm: true} "
            "(stage 1 alike)");
  EXPECT_EQ(FrameworkSetting(*ParsePolicySpec("megatron,bucket_size=4e7,overlap_grad_reduce=1"), 0),
            "--ddp-bucket-size 40000000 --overlap-grad-reduce --use-distributed-optimizer");
  EXPECT_EQ(FrameworkSetting(*ParsePolicySpec("fsdp2,inflight=2"), 0),
            "fully_shard() per FSDP instance; module.set_reduce_scatter_max_input_buffers(2) "
            "(PR #186000; 1 without it)");
}

// A trace emitted for FSDP1 or FSDP2 compares its own implementation's policy first;
// fairscale's and unnamed traces the default four.
TEST(DefaultPoliciesFor, PutsTheTracesImplementationFirst) {
  const auto names = [](const std::vector<PolicySpec>& specs) {
    std::vector<std::string> out;
    for (const PolicySpec& spec : specs) out.push_back(spec.name);
    return out;
  };
  const std::vector<std::string> defaults = {"always-allocated", "backward-only", "per-group-dedup",
                                             "unbucketed"};
  EXPECT_EQ(names(DefaultPoliciesFor(std::nullopt)), defaults);
  EXPECT_EQ(names(DefaultPoliciesFor(FsdpImpl::kFairscale)), defaults);
  std::vector<PolicySpec> fsdp1 = DefaultPoliciesFor(FsdpImpl::kFsdp1);
  ASSERT_EQ(fsdp1.size(), 5u);
  EXPECT_EQ(fsdp1.front().name, "fsdp1");
  EXPECT_EQ(FrameworkName(fsdp1.front()), "PyTorch FSDP1");
  // The setting a trace of that implementation carries (the replay fills it in) is quoted.
  fsdp1.front().setting = "FullyShardedDataParallel(module, limit_all_gathers=True)";
  EXPECT_EQ(FrameworkSetting(fsdp1.front(), 0),
            "FullyShardedDataParallel(module, limit_all_gathers=True)");
  std::vector<PolicySpec> fsdp2 = DefaultPoliciesFor(FsdpImpl::kFsdp2);
  EXPECT_EQ(names(fsdp2).front(), "fsdp2");
  fsdp2.front().setting = "fully_shard(module, reshard_after_forward=True)";
  EXPECT_EQ(FrameworkSetting(fsdp2.front(), 0), "fully_shard(module, reshard_after_forward=True)");
}

// The one identity of an implementation (core/fsdp_impl.h): its name parses back to it, and the
// policy it names as its own is a preset whose strategy belongs to it, so that renaming either
// fails here rather than silently dropping the trace's own policy from the comparison.
TEST(FsdpImpls, EachNamesItselfAndItsOwnPolicyOnce) {
  for (const FsdpImplInfo& info : FsdpImpls()) {
    SCOPED_TRACE(std::string(info.name));
    EXPECT_EQ(ParseFsdpImpl(info.name), info.impl);
    EXPECT_EQ(&InfoOf(info.impl), &info);
    if (info.own_policy.empty()) {
      EXPECT_EQ(DefaultPoliciesFor(info.impl).size(), DefaultPolicies().size());
      continue;
    }
    Result<PolicySpec> own = ParsePolicySpec(info.own_policy);
    ASSERT_TRUE(own.ok()) << own.status().message();
    EXPECT_EQ(ImplementationOf(own->strategy), info.impl);
    EXPECT_EQ(DefaultPoliciesFor(info.impl).front().name, info.own_policy);
  }
  EXPECT_EQ(ParseFsdpImpl("fsdp3"), std::nullopt);
  EXPECT_EQ(FsdpImplChoices(), "fairscale, fsdp1 or fsdp2");
  EXPECT_EQ(ImplementationOf(Strategy::kFairscale), std::nullopt);
  EXPECT_EQ(ImplementationOf(Strategy::kDdp), std::nullopt);
}

}  // namespace
}  // namespace bucketsim
