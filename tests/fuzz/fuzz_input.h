// What every fuzz harness shares: the input as text. Harnesses call the same functions the
// binary does on a file's contents; anything they return is fine, a crash, a sanitizer report
// or a failed BUCKETSIM_CHECK is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace bucketsim::fuzz {

inline std::string_view AsText(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace bucketsim::fuzz
