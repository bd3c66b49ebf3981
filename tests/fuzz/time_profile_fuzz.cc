// The time profile of `--profile`; a profile that reads must write back and read again the same.
#include <cstdlib>

#include "fuzz_input.h"
#include "io/time_profile_io.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(bucketsim::fuzz::AsText(data, size));
  bucketsim::Result<bucketsim::TimeProfile> profile =
      bucketsim::ParseTimeProfile(text, "fuzz.json");
  if (!profile.ok()) return 0;
  std::string written = bucketsim::TimeProfileJson(*profile);
  bucketsim::Result<bucketsim::TimeProfile> again =
      bucketsim::ParseTimeProfile(written, "written.json");
  if (!again.ok() || bucketsim::TimeProfileJson(*again) != written) std::abort();
  return 0;
}
