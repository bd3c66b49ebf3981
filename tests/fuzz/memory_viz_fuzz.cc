// compare --memory-viz on a fuzzed trace: the replay of one policy with the caching allocator
// model (an 80 GiB device, so large allocations reach its out-of-memory path) streamed into a
// PyTorch memory snapshot pickle by MemoryVizSnapshot and PickleWriter. Beyond what the
// sanitizers catch: a replay that fails leaves no file; one that succeeds leaves a file of the
// size the writer counted, ending in pickle's STOP opcode.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/units.h"
#include "engine/replay_policies.h"
#include "fuzz_input.h"
#include "io/trace_reader.h"
#include "policy/policy_spec.h"
#include "report/memory_viz_snapshot.h"

namespace bucketsim {
namespace {

const std::string& Directory() {
  static const std::string dir = [] {
    auto path = std::filesystem::temp_directory_path() /
                ("bucketsim-fuzz-memory-viz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path.string();
  }();
  return dir;
}

ReplayRequest Request() {
  ReplayRequest r;
  r.policies = {*ParsePolicySpec("backward-only")};
  MemoryModelOptions memory;
  memory.allocator = "caching";
  memory.device_memory = 80 * kGiB;
  memory.device_overhead = 0;
  r.make_memory_model = *MakeMemoryModelFactory(memory);
  return r;
}

}  // namespace
}  // namespace bucketsim

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace bucketsim;
  static const ReplayRequest base = Request();
  const std::string path = Directory() + "/backward-only.pickle";
  std::filesystem::remove(path);
  std::string_view text = fuzz::AsText(data, size);
  TraceSource source = [text](TraceHeader& header, EventSink& sink) {
    return ReadTraceFromString(text, "fuzz.json", header, sink);
  };
  Result<std::unique_ptr<MemoryVizSnapshot>> snapshot =
      MemoryVizSnapshot::Create({path, "fuzz.json", std::nullopt});
  if (!snapshot.ok()) std::abort();  // the temporary directory is ours
  ReplayRequest request = base;
  request.memory_events = {snapshot->get()};
  const bool ok = ReplayPolicies(source, request).ok();
  const bool committed = (*snapshot)->committed();
  const std::uint64_t bytes = (*snapshot)->file_bytes();
  snapshot->reset();  // an uncommitted file's temporary goes with it
  if (!ok || !committed) {
    if (std::filesystem::exists(path)) std::abort();  // a failed replay left a file
    return 0;
  }
  if (std::filesystem::file_size(path) != bytes) std::abort();
  std::ifstream in(path, std::ios::binary);
  in.seekg(-1, std::ios::end);
  if (in.get() != '.') std::abort();  // not ended by STOP
  return 0;
}
