// A whole replay of a parsed trace under every named policy (DefaultPolicies(), so a policy
// added to the parser's presets is fuzzed too) with the caching allocator model, as `compare`
// runs it: reader, checker, engine, policies, memory model and the sim backend's time model.
// An 80 GiB device makes large fuzzed allocations reach the model's out-of-memory path.
#include "core/units.h"
#include "engine/replay_policies.h"
#include "fuzz_input.h"
#include "io/trace_reader.h"

namespace bucketsim {
namespace {

const ReplayRequest& Request() {
  static const ReplayRequest request = [] {
    ReplayRequest r;
    r.policies = DefaultPolicies();
    MemoryModelOptions memory;
    memory.allocator = "caching";
    memory.device_memory = 80 * kGiB;
    r.make_memory_model = *MakeMemoryModelFactory(memory);
    return r;
  }();
  return request;
}

}  // namespace
}  // namespace bucketsim

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text = bucketsim::fuzz::AsText(data, size);
  bucketsim::TraceSource source = [text](bucketsim::TraceHeader& header,
                                         bucketsim::EventSink& sink) {
    return bucketsim::ReadTraceFromString(text, "fuzz.json", header, sink);
  };
  (void)bucketsim::ReplayPolicies(source, bucketsim::Request());
  return 0;
}
