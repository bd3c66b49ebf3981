// The caching-allocator model alone, on the exact sequence of calls a replay makes: one policy's
// replay of a depth trace (replay_depth_bench.cc) is run once with a recording model in front of
// a CachingAllocatorModel, and the timed loop plays the recorded calls (Allocate, Free, the
// pending-stream frees, Fragmentation at each new peak) into a fresh model. items_per_second is
// trace events per second of the model's share of a replay, so 1 / (this) + 1 / (the exact
// model's BM_ReplayDepth) predicts the caching model's BM_ReplayDepth. The ops counter is model
// calls per iteration. Run, for example:
//
//   build/bench/bucketsim_bench --benchmark_filter=BM_CachingModelCalls --benchmark_repetitions=3
#include <algorithm>
#include <memory>
#include <variant>

#include <benchmark/benchmark.h>

#include "bench_trace.h"
#include "memory/caching_allocator_model.h"

namespace bucketsim {
namespace {

struct AllocateCall {
  Bytes requested;
  StreamId stream;
};
struct FreeCall {
  std::uint32_t allocation;  // index of the AllocateCall, in calls order
};
struct PendingFreeCall {
  std::uint32_t allocation;
  std::vector<StreamId> pending;
};
struct SynchronizeCall {
  StreamId stream;
};
struct FragmentationCall {};
struct EmptyCacheCall {};
using Call = std::variant<AllocateCall, FreeCall, PendingFreeCall, SynchronizeCall,
                          FragmentationCall, EmptyCacheCall>;

// Forwards to a real model and records what was asked of it.
class RecordingModel final : public MemoryModel {
 public:
  explicit RecordingModel(std::vector<Call>* calls) : calls_(calls) {}
  std::string_view name() const override { return model_.name(); }
  Result<Block> Allocate(Bytes requested, StreamId stream) override {
    Result<Block> block = model_.Allocate(requested, stream);
    if (block.ok()) {
      BUCKETSIM_CHECK(block->handle != CachingAllocatorModel::kZeroBytesHandle);
      calls_->push_back(AllocateCall{requested, stream});
      if (allocation_of_.size() <= block->handle) allocation_of_.resize(block->handle + 1);
      allocation_of_[block->handle] = allocations_++;
    }
    return block;
  }
  void Free(const Block& block) override {
    calls_->push_back(FreeCall{allocation_of_[block.handle]});
    model_.Free(block);
  }
  void FreeWithPendingStreams(const Block& block, std::vector<StreamId> pending) override {
    calls_->push_back(PendingFreeCall{allocation_of_[block.handle], pending});
    model_.FreeWithPendingStreams(block, std::move(pending));
  }
  void StreamSynchronized(StreamId stream) override {
    calls_->push_back(SynchronizeCall{stream});
    model_.StreamSynchronized(stream);
  }
  void EmptyCache() override {
    calls_->push_back(EmptyCacheCall{});
    model_.EmptyCache();
  }
  Bytes allocated_bytes() const override { return model_.allocated_bytes(); }
  Bytes reserved_bytes() const override { return model_.reserved_bytes(); }
  std::optional<FragmentationInfo> Fragmentation() const override {
    calls_->push_back(FragmentationCall{});
    return model_.Fragmentation();
  }
  std::optional<AllocatorTotals> Totals() const override { return model_.Totals(); }

 private:
  std::vector<Call>* calls_;
  CachingAllocatorModel model_;
  std::vector<std::uint32_t> allocation_of_;
  std::uint32_t allocations_ = 0;
};

// The timed part: a fresh model, every recorded call. Not inlined, so that callgrind can count
// its instructions alone (--toggle-collect='*PlayCalls*').
[[gnu::noinline]] void PlayCalls(const std::vector<Call>& calls) {
  CachingAllocatorModel model;
  std::vector<Block> blocks;
  for (const Call& call : calls) {
    if (const auto* alloc = std::get_if<AllocateCall>(&call)) {
      blocks.push_back(*model.Allocate(alloc->requested, alloc->stream));
    } else if (const auto* free = std::get_if<FreeCall>(&call)) {
      model.Free(blocks[free->allocation]);
    } else if (const auto* pending = std::get_if<PendingFreeCall>(&call)) {
      model.FreeWithPendingStreams(blocks[pending->allocation], pending->pending);
    } else if (const auto* sync = std::get_if<SynchronizeCall>(&call)) {
      model.StreamSynchronized(sync->stream);
    } else if (std::holds_alternative<FragmentationCall>(call)) {
      benchmark::DoNotOptimize(model.Fragmentation());
    } else {
      model.EmptyCache();
    }
  }
  benchmark::DoNotOptimize(model.reserved_bytes());
}

void BM_CachingModelCalls(benchmark::State& state, Depth depth, const char* policy) {
  Result<ReplayRequest> request = RequestFor({policy});
  if (SkipIfError(state, request.status())) return;
  auto calls = std::make_shared<std::vector<Call>>();
  request->make_memory_model = [calls](const TraceHeader&) -> Result<std::unique_ptr<MemoryModel>> {
    return std::unique_ptr<MemoryModel>(std::make_unique<RecordingModel>(calls.get()));
  };
  const int scale = std::max(1, FromEnvironment("BUCKETSIM_BENCH_DEPTH_SCALE", 1));
  const StoredTrace& trace = DepthTrace(depth.layers, std::max(1, depth.iterations / scale));
  Result<ReplayOutcome> outcome = ReplayPolicies(StoredSource(trace), *request);
  if (SkipIfError(state, outcome.status())) return;
  for (auto _ : state) PlayCalls(*calls);
  CountEvents(state, trace.events.size());
  state.counters["calls"] = static_cast<double>(calls->size());
}

[[maybe_unused]] const bool kRegistered = [] {
  for (const Depth& depth : {kShallow, kDeep}) {
    for (const char* policy : kThreePolicies) {
      std::string name = std::string("BM_CachingModelCalls/") + depth.name + "/" + policy;
      benchmark::RegisterBenchmark(name.c_str(), BM_CachingModelCalls, depth, policy)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    }
  }
  return true;
}();

}  // namespace
}  // namespace bucketsim
