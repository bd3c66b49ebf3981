// What an allocation is for. The first six categories come from the trace (the tensors the
// training script made); the others are made by a bucket policy at replay and never appear in a
// trace. Reports break the peak down by category, so a reader sees at once whether the peak is
// activations or bucket buffers.
#pragma once

#include <optional>
#include <string_view>

namespace bucketsim {

enum class Category : std::uint8_t {
  // From the trace.
  kParam,
  kActivation,
  kGrad,
  kOptimizerState,
  kAllGather,
  kOther,
  // Made by the policy at replay.
  kBucketData,        // a bucket's (ws, S) input buffer
  kBucketOutput,      // a bucket's current (S,) output shard
  kRetiredOutput,     // an output shard replaced at a flush, kept alive by gradient views
  kRsStackTemp,       // torch.stack of the inputs on the bucketed path
  kRsCatTemp,         // torch.cat of the inputs on the bypass path
  kRsContiguousTemp,  // .contiguous() of a partly filled bucket at flush
  kBypassOutput,      // the (n,) output of a bypassed reduce-scatter
  kGradShard,         // the reduced shard cast into a new tensor (mixed precision)
};

inline constexpr int kNumCategories = 14;
inline constexpr int kNumTraceCategories = 6;

std::string_view CategoryName(Category category);
// Only the trace categories are accepted: a trace never names a policy category.
std::optional<Category> ParseTraceCategory(std::string_view name);
constexpr bool IsPolicyCategory(Category category) {
  return static_cast<int>(category) >= kNumTraceCategories;
}
// Bucket buffers proper: data and the current output shard.
constexpr bool IsBucketCategory(Category category) {
  return category == Category::kBucketData || category == Category::kBucketOutput;
}

}  // namespace bucketsim
