// `bucketsim tune` at the size issue 21 asks for: 384 configurations of a 7B-class model program
// (the transformer preset at GPT-3 6.7B's shape: 32 blocks, hidden 4096, 32 heads, seq 4096,
// flash attention, bf16, whose program records its blocks' calls) emitted and replayed under
// FSDP2's policy with the caching allocator on an 80 GiB device: checkpointing (none, Block) x
// optimizer implementation (for-loop, foreach, fused) x reshard after forward (true, false) x
// offload (false, true) x world size (8 to 128 by 8). The grid as the command runs it
// (RunTuneGrid: emit, replay, one thread per core); the time per configuration is the grid's
// wall time over 384. Run on 1 and on every core.
#include <thread>

#include <benchmark/benchmark.h>

#include "core/units.h"
#include "engine/tune_grid.h"
#include "gen/transformer_preset.h"
#include "gen/tune_runner.h"
#include "grid_bench.h"
#include "memory/device_overhead.h"
#include "memory/make_memory_model.h"

namespace bucketsim {

TuneRun Fsdp2Bf16Run(const ModelProgram& program) {
  TuneRun run;
  run.program = &program;
  run.options.fsdp_impl = FsdpImpl::kFsdp2;
  run.options.group_layout = GroupLayout::kShared;
  run.options.compute_dtype = DType::kBFloat16;
  run.options.compute_dtype_given = true;
  return run;
}

void RunGridOn80GiB(benchmark::State& state, TuneRun& run, const std::vector<TuneSettings>& grid) {
  MemoryModelOptions memory;
  memory.device_memory = 80 * kGiB;
  Result<MemoryModelFactory> factory = MakeMemoryModelFactory(memory);
  if (!factory.ok()) {
    state.SkipWithError(factory.status().ToString().c_str());
    return;
  }
  run.replay.make_memory_model = *factory;
  run.replay.device_budget = [memory](const TraceHeader& header) {
    return DeviceBudgetOf(memory, header);
  };
  std::size_t fits = 0;
  for (auto _ : state) {
    Result<std::vector<TunePoint>> points = RunTuneGrid(run, grid);
    if (!points.ok()) {
      state.SkipWithError(points.status().ToString().c_str());
      return;
    }
    fits = 0;
    for (const TunePoint& point : *points) fits += TuneFits(point, std::nullopt) ? 1 : 0;
    benchmark::DoNotOptimize(points->data());
  }
  state.counters["configs"] = static_cast<double>(grid.size());
  state.counters["fit_80GiB"] = static_cast<double>(fits);
  state.counters["s_per_config"] = benchmark::Counter(
      static_cast<double>(grid.size()),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

namespace {

std::vector<TuneAxis> Axes384() {
  TuneAxis world{"world-size", {}};
  for (int ranks = 8; ranks <= 128; ranks += 8) world.values.push_back(std::to_string(ranks));
  return {{"checkpoint", {"none", "Block"}},
          {"optimizer-impl", {"for-loop", "foreach", "fused"}},
          {"reshard-after-forward", {"true", "false"}},
          {"offload-params", {"false", "true"}},
          world};
}

void BM_Tune384(benchmark::State& state) {
  TransformerConfig config;
  config.layers = 32;
  config.hidden = 4096;
  config.heads = 32;
  config.seq = 4096;
  config.vocab = 32000;
  config.attention = AttentionKind::kFlash;
  Result<ModelProgram> program = TransformerProgram(config);
  if (!program.ok()) {
    state.SkipWithError(program.status().ToString().c_str());
    return;
  }
  TuneRun run = Fsdp2Bf16Run(*program);
  run.threads = static_cast<unsigned>(state.range(0));
  RunGridOn80GiB(state, run, TuneGrid(Axes384()));
}
BENCHMARK(BM_Tune384)
    ->Arg(1)
    ->Arg(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())))
    ->Unit(benchmark::kSecond)
    ->UseRealTime()
    ->Iterations(1);

}  // namespace
}  // namespace bucketsim
