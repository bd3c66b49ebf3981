// The FSDP implementations bucketsim emits, by one identity: the enum the code switches on, the
// one name traces, programs and flags spell it with (parsed and printed here only), and the
// bucket policy each runs on its own (policy/policy_spec.h's preset of that name), which a
// trace emitted for it is compared under first. A new implementation is a value here, its
// row in the table (fsdp_impl.cc), and its emitter (gen/fsdp_implementation.h).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace bucketsim {

enum class FsdpImpl : std::uint8_t {
  kFairscale,  // fairscale's FullyShardedDataParallel (2021), the reference/fsdp_semantics.md one
  kFsdp1,      // torch.distributed.fsdp.FullyShardedDataParallel (torch 2.6)
  kFsdp2,      // torch.distributed.fsdp.fully_shard (torch 2.6)
};

struct FsdpImplInfo {
  FsdpImpl impl;
  std::string_view name;  // "fairscale", "fsdp1", "fsdp2"
  // The bucket policy preset the implementation runs itself; empty: none (fairscale's bucketer
  // is the choice the default comparison is about).
  std::string_view own_policy;
};

// Every implementation, in the enum's order.
std::span<const FsdpImplInfo> FsdpImpls();
const FsdpImplInfo& InfoOf(FsdpImpl impl);
std::string_view FsdpImplName(FsdpImpl impl);
// The implementation `name` names; none for another name.
std::optional<FsdpImpl> ParseFsdpImpl(std::string_view name);
// "fairscale, fsdp1 or fsdp2", for messages.
std::string FsdpImplChoices();

}  // namespace bucketsim
