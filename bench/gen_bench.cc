// Generator speed: a ~1M-event trace from each preset, emitted into a sink that drops every
// event (the generator alone) and into TraceWriter writing to a stream that discards its bytes
// (generation plus serialisation, no disk). Both report events/s; MB/s is the size of the JSON
// the trace serialises to (measured by the writer run) over the time taken.
#include <ostream>
#include <streambuf>

#include <benchmark/benchmark.h>

#include "bench_trace.h"
#include "gen/convnet_preset.h"
#include "gen/transformer_preset.h"
#include "io/trace_writer.h"

namespace bucketsim {
namespace {

// A stream buffer that counts the bytes written and keeps none of them.
class CountingBuffer final : public std::streambuf {
 public:
  std::uint64_t bytes() const { return bytes_; }

 protected:
  std::streamsize xsputn(const char*, std::streamsize count) override {
    bytes_ += static_cast<std::uint64_t>(count);
    return count;
  }
  int_type overflow(int_type c) override {
    if (!traits_type::eq_int_type(c, traits_type::eof())) ++bytes_;
    return traits_type::not_eof(c);
  }

 private:
  std::uint64_t bytes_ = 0;
};

// 1000 blocks (about 21 events each per iteration) for 48 iterations: about 1.0M events.
TransformerConfig BenchTransformer() {
  TransformerConfig config;
  config.layers = 1000;
  config.iterations = 48;
  return config;
}

// fairscale's memory-test model (about 128 events per iteration) for 7900 iterations: about
// 1.0M events.
ConvnetConfig BenchConvnet() {
  ConvnetConfig config;
  config.iterations = 7900;
  config.group_layout = GroupLayout::kPerInstance;
  return config;
}

// Bytes of the JSON `generate` writes: one writer run outside the timed loop.
template <typename Generate>
std::uint64_t SerialisedBytes(const Generate& generate) {
  CountingBuffer buffer;
  std::ostream out(&buffer);
  TraceWriter writer(out, "null");
  return generate(writer).ok() ? buffer.bytes() : 0;
}

template <typename Generate>
void GenerateIntoNullSink(benchmark::State& state, const Generate& generate) {
  const std::uint64_t json_bytes = SerialisedBytes(generate);
  std::uint64_t events = 0;
  for (auto _ : state) {
    CountingSink sink;
    if (SkipIfError(state, generate(sink))) return;
    events = sink.events();
  }
  CountEvents(state, events);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json_bytes));
}

template <typename Generate>
void GenerateIntoWriter(benchmark::State& state, const Generate& generate) {
  std::uint64_t json_bytes = 0;
  for (auto _ : state) {
    CountingBuffer buffer;
    std::ostream out(&buffer);
    TraceWriter writer(out, "null");
    if (SkipIfError(state, generate(writer))) return;
    json_bytes = buffer.bytes();
  }
  // The same events as the null-sink run; counted once more outside the loop.
  CountingSink counter;
  if (SkipIfError(state, generate(counter))) return;
  CountEvents(state, counter.events());
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * json_bytes));
  state.counters["trace_MB"] = static_cast<double>(json_bytes) / 1e6;
}

const auto kTransformer = [](EventSink& sink) {
  return GenerateTransformer(BenchTransformer(), sink);
};
const auto kConvnet = [](EventSink& sink) { return GenerateConvnet(BenchConvnet(), sink); };

void BM_GenTransformerNullSink(benchmark::State& state) {
  GenerateIntoNullSink(state, kTransformer);
}
void BM_GenTransformerWriter(benchmark::State& state) { GenerateIntoWriter(state, kTransformer); }
void BM_GenConvnetNullSink(benchmark::State& state) { GenerateIntoNullSink(state, kConvnet); }
void BM_GenConvnetWriter(benchmark::State& state) { GenerateIntoWriter(state, kConvnet); }

constexpr int kRuns = 3;
BENCHMARK(BM_GenTransformerNullSink)->Unit(benchmark::kMillisecond)->Iterations(kRuns);
BENCHMARK(BM_GenTransformerWriter)->Unit(benchmark::kMillisecond)->Iterations(kRuns);
BENCHMARK(BM_GenConvnetNullSink)->Unit(benchmark::kMillisecond)->Iterations(kRuns);
BENCHMARK(BM_GenConvnetWriter)->Unit(benchmark::kMillisecond)->Iterations(kRuns);

}  // namespace
}  // namespace bucketsim
