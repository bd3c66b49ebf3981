#include "core/comma_list.h"

namespace bucketsim {

std::vector<std::string_view> SplitCommaList(std::string_view text) {
  std::vector<std::string_view> entries;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    entries.push_back(text.substr(
        start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return entries;
    start = comma + 1;
  }
}

}  // namespace bucketsim
