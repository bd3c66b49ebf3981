// An FSDP implementation as the program emitter sees it. The emitter (fsdp_emitter.cc) runs a
// model program the way autograd runs it, the same for every implementation: activations,
// their saves and gradients, checkpoint recomputation, each parameter's gradient as its
// AccumulateGrad node receives it. What differs between fairscale's FSDP, PyTorch's FSDP1 and
// FSDP2 is everything about the parameters: what each rank keeps of them, when a unit is
// gathered and freed (prefetching included), how a unit's gradients are reduced and kept, and
// the optimizer state's shape. An implementation answers the emitter's hooks at the program's
// points (a unit's forward begins and ends, its backward begins and ends, the end of backward,
// the step, zero_grad) by acting on the trace through TraceEmitter. It owns its own state (the
// gathered parameters, the kept gradients); the emitter owns the events' order and ids.
//
// Hooks come in the order a real run calls them: PreForward/PostForward around each unit's
// forward (again with Pass::kRecompute inside a checkpointed region's backward), PreBackward
// when backward reaches the end of a unit's forward, PostBackward when it reaches its
// beginning, EndBackward once per backward (the root's final callback, before "after bwd"),
// Step, ZeroGrad.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "core/event.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "core/units.h"
#include "gen/compute_rates.h"
#include "gen/gen_options.h"

namespace bucketsim {

struct ModelProgram;

// The default (computation) stream: activations, their gradients, the optimizer step. Every
// implementation's header lists it first (BuildHeader).
inline constexpr StreamId kDefaultStream = 0;

// The trace being emitted, as an implementation acts on it.
class TraceEmitter {
 public:
  virtual ~TraceEmitter() = default;
  // A new allocation (ids from 1, never reused) and its free.
  virtual Status Alloc(Bytes bytes, StreamId stream, Category category, std::uint64_t& id) = 0;
  virtual Status Free(std::uint64_t id) = 0;
  // Any other event (a reduce-scatter request, a flush, zero_grad); its index is set here.
  virtual Status Emit(Event event) = 0;
  // A span on the default stream doing `work`, priced by the run's rates (gen/compute_rates.h).
  virtual Status Compute(std::string_view span, const SpanWork& work) = 0;
  // A copy of `bytes` between host and device memory on `stream` (CPU offload): a span at the
  // host link's rate; nothing where the rates do not price host copies (no --gpu).
  virtual Status HostCopy(std::string_view span, Bytes bytes, StreamId stream) = 0;
  // Parameter p of unit f's gradient as autograd hands it to the unit's post-backward hook:
  // the gradient of a parameter of its own, or a flat parameter's (its views' gradients
  // concatenated, with the implementation's GradPadding); zeros where no backward reached it.
  // The implementation owns the allocation `id` from then on (frees or keeps it). Each
  // parameter of a unit once, in order, from PostBackward.
  virtual Status TakeParamGrad(std::size_t f, std::size_t p, std::uint64_t& id) = 0;
  // The same for an implementation whose parameters are a flat parameter's views themselves
  // (FSDP2): each view's gradient as its own AccumulateGrad node keeps it, no cat. `ids` gets
  // one id per view (one for a parameter without views); 0 where no backward reached the view
  // (its .grad stays None). Without param_reads the emitter made one gradient for the whole
  // parameter: `ids` then holds that one id. Instead of TakeParamGrad, not with it.
  virtual Status TakeViewGrads(std::size_t f, std::size_t p, std::vector<std::uint64_t>& ids) = 0;
};

// Where a hook is called from: the forward itself, or a checkpointed region's recomputation
// inside backward (the unit's forward hooks run again there).
enum class Pass { kForward, kRecompute };

class FsdpImplementation {
 public:
  virtual ~FsdpImplementation() = default;
  // The header's streams (the default stream first: activations live on stream 0), process
  // groups and FSDP units with their parameters as the reduce-scatter requests name them.
  virtual Status BuildHeader(TraceHeader& header) const = 0;
  // Model construction: what each rank keeps of every parameter for the whole run.
  virtual Status Init() = 0;
  // The root's pre-forward hook begins, before anything of the forward (its input casts, its
  // all-gather): lazy init, and what the root does once per forward.
  virtual Status ForwardBegins() { return Status::Ok(); }
  virtual Status PreForward(std::size_t f, Pass pass) = 0;
  virtual Status PostForward(std::size_t f, Pass pass) = 0;
  // The forward's post-forward hook of unit f returns, after the runs it made (FSDP2's output
  // casts): what its locals held goes.
  virtual Status PostForwardReturns(std::size_t /*f*/) { return Status::Ok(); }
  virtual Status PreBackward(std::size_t f) = 0;
  virtual Status PostBackward(std::size_t f) = 0;
  virtual Status EndBackward() = 0;
  virtual Status Step(int iteration) = 0;
  virtual Status ZeroGrad() = 0;
  // The element size of unit f's gathered parameters and so of their gradients.
  virtual Bytes ComputeSize(std::size_t f) const = 0;
  // Elements after a flat parameter's views that are part of it (FSDP1 pads its FlatParameter
  // to a multiple of the world size): the gradient autograd makes includes them (zeros).
  virtual Numel GradPadding(std::size_t /*f*/, std::size_t /*p*/) const { return 0; }
};

// The implementation `options.fsdp_impl` names, acting on `trace`, which must outlive it.
std::unique_ptr<FsdpImplementation> MakeFsdpImplementation(const ModelProgram& model,
                                                           const GenOptions& options,
                                                           TraceEmitter& trace);

}  // namespace bucketsim
