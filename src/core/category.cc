#include "core/category.h"

#include <array>

namespace bucketsim {
namespace {

constexpr std::array<std::string_view, kNumCategories> kNames = {
    "param",       "activation",         "grad",          "optimizer_state", "all_gather",
    "other",       "bucket_data",        "bucket_output", "retired_output",  "rs_stack_temp",
    "rs_cat_temp", "rs_contiguous_temp", "bypass_output", "grad_shard",
};

}  // namespace

std::string_view CategoryName(Category category) { return kNames[static_cast<int>(category)]; }

std::optional<Category> ParseTraceCategory(std::string_view name) {
  for (int i = 0; i < kNumTraceCategories; ++i) {
    if (kNames[i] == name) return static_cast<Category>(i);
  }
  return std::nullopt;
}

}  // namespace bucketsim
