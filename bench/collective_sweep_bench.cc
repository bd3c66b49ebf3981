// Reduce-scatter size sweep, 1 KiB to 256 MiB of send buffer, through bucketsim's host backend
// and as a bare MPI_Reduce_scatter_block loop in the same job. Run under mpirun:
//   mpirun --allow-run-as-root --oversubscribe -np 2 build/bench/bucketsim_collective_sweep
// Prints nccl-tests' figures (time, algbw, busbw) for both and the ratio of the backend's busbw
// to bare MPI's. Not a Google Benchmark suite: every rank must run the same iterations of the
// same collective, which Benchmark's adaptive iteration counts do not guarantee.
#include <cstdio>
#include <cstdlib>

#include "backend/host/collective_sweep.h"
#include "backend/span_timing.h"

int main(int argc, char** argv) {
  using namespace bucketsim;
  Bytes max_bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256 * kMiB;
  Result<std::unique_ptr<MpiWorld>> world = MpiWorld::Init();
  if (!world.ok()) {
    std::fprintf(stderr, "collective sweep: %s\n", world.status().message().c_str());
    return 2;
  }
  CollectiveSweepOptions options;
  options.send_bytes = DoublingSizes(kKiB, max_bytes);
  options.iterations = 20;
  options.warmup = 3;
  Result<std::vector<CollectiveSweepPoint>> points = RunCollectiveSweep(**world, options);
  if (!points.ok()) {
    std::fprintf(stderr, "collective sweep: %s\n", points.status().message().c_str());
    return 2;
  }
  if ((*world)->rank() != 0) return 0;
  std::printf("# reduce-scatter, fp32, %d ranks; medians of %d iterations (slowest rank)\n",
              (*world)->size(), options.iterations);
  std::printf("%12s %12s %12s %12s %12s %12s %12s %8s\n", "bytes", "bare (us)", "bare busbw",
              "bsim (us)", "bsim busbw", "e2e (us)", "e2e busbw", "ratio");
  for (const CollectiveSweepPoint& p : *points) {
    double bare = BusBandwidthGBps(p.send_bytes, p.bare_us, p.ranks);
    double span = BusBandwidthGBps(p.send_bytes, p.backend_us, p.ranks);
    double e2e = BusBandwidthGBps(p.send_bytes, p.end_to_end_us, p.ranks);
    std::printf("%12llu %12.1f %12.3f %12.1f %12.3f %12.1f %12.3f %8.3f\n",
                static_cast<unsigned long long>(p.send_bytes), p.bare_us, bare, p.backend_us, span,
                p.end_to_end_us, e2e, bare > 0 ? span / bare : 0.0);
  }
  return 0;
}
