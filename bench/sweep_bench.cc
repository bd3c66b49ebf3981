// `bucketsim sweep` at scale: 4 bucket caps x 4 policies (16 configurations) replayed in one pass
// over the ~1.5M-event bench trace, with the derived H100 time profile (so every copy and
// collective is priced) and each memory model; with the measured CI profile (collective times
// interpolated between measured points instead of the alpha-beta line); and without a profile,
// for the cost of the time model. The time per configuration is the pass's wall time over `configs`
// (16).
#include <benchmark/benchmark.h>

#include "backend/sim/sim_backend.h"
#include "bench_trace.h"
#include "engine/cap_sweep.h"
#include "io/time_profile_io.h"
#include "memory/make_memory_model.h"

namespace bucketsim {
namespace {

constexpr double kCapsMb[] = {1, 5, 25, 100};
constexpr const char* kPolicies[] = {"always-allocated", "backward-only", "per-group-dedup",
                                     "lifetime=always,key=members"};

void BM_Sweep16(benchmark::State& state, const char* allocator, const char* profile_file) {
  Result<ReplayRequest> request = RequestFor({});
  if (SkipIfError(state, request.status())) return;
  // Each policy at each cap, as sweep expands them (engine/cap_sweep.h).
  std::vector<PolicySpec> policies;
  for (const char* name : kPolicies) policies.push_back(*ParsePolicySpec(name));
  request->policies = SweepPolicies(policies, {std::begin(kCapsMb), std::end(kCapsMb)},
                                    /*with_fixed=*/true);
  Result<MemoryModelFactory> factory =
      MakeMemoryModelFactory(MemoryModelOptions{allocator, "", std::nullopt, std::nullopt});
  if (SkipIfError(state, factory.status())) return;
  request->make_memory_model = *factory;
  if (profile_file != nullptr) {
    Result<TimeProfile> profile =
        ReadTimeProfile(std::string(BUCKETSIM_SOURCE_DIR) + "/traces/profiles/" + profile_file);
    if (SkipIfError(state, profile.status())) return;
    auto shared = std::make_shared<const TimeProfile>(*profile);
    request->make_backend = [shared] { return std::make_unique<SimBackend>(shared); };
  }
  ReplayLoop(state, *request);
  state.counters["configs"] = static_cast<double>(request->policies.size());
}

BENCHMARK_CAPTURE(BM_Sweep16, exact_h100_profile, "exact", "h100-8gpu-nvlink.json")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_Sweep16, caching_h100_profile, "caching", "h100-8gpu-nvlink.json")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_Sweep16, caching_ci_measured_profile, "caching", "ci-2core-mpi.json")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_Sweep16, exact_no_profile, "exact", nullptr)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace
}  // namespace bucketsim
