// PYTORCH_CUDA_ALLOC_CONF text (`--alloc-conf`, a trace's alloc_conf), and a caching model made
// from what it accepts.
#include "fuzz_input.h"
#include "memory/alloc_conf.h"
#include "memory/make_memory_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string text(bucketsim::fuzz::AsText(data, size));
  bucketsim::Result<bucketsim::AllocConf> conf = bucketsim::ParseAllocConf(text);
  if (!conf.ok()) return 0;
  for (bucketsim::Bytes request :
       {bucketsim::Bytes{1}, bucketsim::Bytes{1} << 20, bucketsim::Bytes{1} << 40}) {
    (void)conf->RoundupDivisions(request);
  }
  bucketsim::MemoryModelOptions options;
  options.alloc_conf = text;
  bucketsim::Result<bucketsim::MemoryModelFactory> factory =
      bucketsim::MakeMemoryModelFactory(options);
  if (factory.ok()) (void)(*factory)(bucketsim::TraceHeader{});
  return 0;
}
