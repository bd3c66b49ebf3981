// `bucketsim tune`'s grid as the benchmarks run it (tune_bench.cc, program_bench.cc): each
// configuration emitted straight into its replay with the caching allocator on an 80 GiB
// device (RunTuneGrid, one thread per `run.threads`), timed over `state`'s iterations; the
// counters are the configurations, how many fit 80 GiB and the seconds per configuration.
#pragma once

#include <vector>

#include <benchmark/benchmark.h>

#include "engine/tune_grid.h"
#include "gen/tune_runner.h"

namespace bucketsim {

// FSDP2 with bf16 parameters and shared process groups over `program` (not owned): the fixed
// flags both grids start from.
TuneRun Fsdp2Bf16Run(const ModelProgram& program);

void RunGridOn80GiB(benchmark::State& state, TuneRun& run, const std::vector<TuneSettings>& grid);

}  // namespace bucketsim
