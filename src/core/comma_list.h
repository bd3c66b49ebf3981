// A comma-separated list as flags take it ("2,4,8", "Block,MLP"): its entries in order, empty
// ones kept, so that each caller refuses "1,,5" or "Block," with its own message rather than
// dropping the entry.
#pragma once

#include <string_view>
#include <vector>

namespace bucketsim {

// "a,b" -> {"a", "b"}; "" -> {""}; "a," -> {"a", ""}. The views point into `text`.
std::vector<std::string_view> SplitCommaList(std::string_view text);

}  // namespace bucketsim
