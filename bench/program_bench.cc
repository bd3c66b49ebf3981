// Llama 3 8B's recorded program (traces/llama3-8b.program.json: tools/examples/llama.py recorded
// on meta for an H100, bf16, 2,577 runs, 1.0 MB of JSON) as `gen program` and a replay take it:
// read and checked (ReadProgramFile), then each configuration emitted straight into an FSDP2
// replay with the caching allocator on an 80 GiB device (RunTuneGrid, what `bucketsim tune`
// runs), torchtitan's recipe (bf16 parameters, fp32 reduction, AdamW foreach, non-reentrant
// checkpointing): checkpointing none and every TransformerBlock, at 8 and 128 ranks. Issue 30
// asks for at most 0.2 s a configuration, reading included.
#include <benchmark/benchmark.h>

#include <functional>
#include <memory>

#include "backend/sim/sim_backend.h"
#include "grid_bench.h"
#include "io/model_program_file.h"

namespace bucketsim {
namespace {

const char* const kLlama8B = BUCKETSIM_SOURCE_DIR "/traces/llama3-8b.program.json";

void BM_Llama8BRead(benchmark::State& state) {
  std::size_t runs = 0;
  for (auto _ : state) {
    Result<ModelProgram> program = ReadProgramFile(kLlama8B);
    if (!program.ok()) {
      state.SkipWithError(program.status().ToString().c_str());
      return;
    }
    runs = program->forward.size();
    benchmark::DoNotOptimize(program->forward.data());
  }
  state.counters["ops"] = static_cast<double>(runs);
}
BENCHMARK(BM_Llama8BRead)->Unit(benchmark::kMillisecond)->UseRealTime();

// The 8B program under torchtitan's recipe (bf16 parameters, fp32 reduction, AdamW,
// non-reentrant checkpointing) with `more` set too, each configuration of `grid` on 80 GiB.
void RunTorchtitanGrid(benchmark::State& state, const std::vector<TuneSettings>& grid,
                       const std::function<void(TuneRun&)>& more) {
  Result<ModelProgram> program = ReadProgramFile(kLlama8B);
  if (!program.ok()) {
    state.SkipWithError(program.status().ToString().c_str());
    return;
  }
  TuneRun run = Fsdp2Bf16Run(*program);
  run.options.reduce_dtype = DType::kFloat32;
  run.options.optimizer = OptimizerKind::kAdamW;
  run.what_ifs.checkpoint_impl = "no-reentrant";
  more(run);
  RunGridOn80GiB(state, run, grid);
}

void BM_Llama8BConfigurations(benchmark::State& state) {
  RunTorchtitanGrid(
      state, TuneGrid({{"checkpoint", {"none", "TransformerBlock"}}, {"world-size", {"8", "128"}}}),
      [](TuneRun& run) {
        run.options.optimizer_impl = OptimizerImpl::kForeach;
        run.options.optimizer_impl_given = true;
      });
}
BENCHMARK(BM_Llama8BConfigurations)->Unit(benchmark::kMillisecond)->UseRealTime();

// Issue 31's grid: selective checkpointing's policies x world sizes x reshard_after_forward x
// optimizer implementation x early stop, 6 x 8 x 2 x 2 x 2 = 384 configurations of the 8B
// program, every block checkpointed non-reentrant (the issue asks <= 10 s on 2 cores).
std::vector<TuneSettings> SacGrid384() {
  return TuneGrid({{"checkpoint-save",
                    {"none", "torchtitan", "_scaled_dot_product_flash_attention", "mm/2", "mm",
                     "_scaled_dot_product_flash_attention,mm"}},
                   {"world-size", {"8", "16", "32", "64", "128", "256", "512", "1024"}},
                   {"reshard-after-forward", {"true", "false"}},
                   {"optimizer-impl", {"foreach", "for-loop"}},
                   {"checkpoint-early-stop", {"true", "false"}}});
}

void BM_Llama8BSacTune384(benchmark::State& state) {
  RunTorchtitanGrid(state, SacGrid384(), [](TuneRun& run) {
    run.what_ifs.checkpoint = "TransformerBlock";
    run.threads = 0;
  });
}
BENCHMARK(BM_Llama8BSacTune384)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

// The same 384 configurations priced on an H100 (`tune --gpu h100-80gb`): compute spans as the
// GPU's roofline, collectives and copies by its estimate (EstimateTimeProfile).
void BM_Llama8BSacTune384OnH100(benchmark::State& state) {
  const auto profile = std::make_shared<const TimeProfile>(
      EstimateTimeProfile(*FindGpu("h100-80gb"), GpuEfficiency{}));
  RunTorchtitanGrid(state, SacGrid384(), [profile](TuneRun& run) {
    run.what_ifs.checkpoint = "TransformerBlock";
    run.options.gpu = "h100-80gb";
    run.replay.make_backend = [profile] { return std::make_unique<SimBackend>(profile); };
    run.threads = 0;
  });
}
BENCHMARK(BM_Llama8BSacTune384OnH100)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);

}  // namespace
}  // namespace bucketsim
