// A model program: a model under FSDP as the trace generator sees it, its FSDP units (each
// with its parameters, flat or not) and the forward pass as a program of ops over them
// (traces/README.md, "Model programs"). The emitter (fsdp_emitter.h) turns it into a trace;
// the reader and writer of its file are io/model_program_file.h.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/event_sink.h"
#include "core/units.h"
#include "gen/gen_options.h"

namespace bucketsim {

// One original parameter inside a flat parameter (fairscale's FlattenParamsWrapper): the flat
// parameter is the concatenation of its views, in order, with no padding between them
// (FlatParameter.__new__: torch.cat of every param reshaped to 1-D; get_param_views:
// split(_param_numels) then view(shape)).
struct ParamView {
  std::string name;  // "layers.0.fc1.weight"
  Numel numel = 0;
  // Its size in dim 0 (shape[0]), which FSDP2 shards (torch.chunk along dim 0); 0: not
  // recorded, taken as 1-D (numel).
  Numel dim0 = 0;
};

struct GenParam {
  std::string name;  // "flat_param_0", "weight", ...
  Numel numel = 0;   // unsharded
  // The original parameters of a flat parameter, their numels summing to `numel`; empty for
  // a parameter of its own (flatten_parameters=False) or one whose views are not known.
  std::vector<ParamView> views = {};
  Numel dim0 = 0;  // a parameter of its own: as ParamView's
};

// A unit's own PyTorch settings, from a recorded model that was already wrapped (the program's
// "fsdp" key: its first unit's settings, then each later unit's that differ), set by
// `gen program` (cli/program_flags.cc) where no flag overrides them for every unit. Unset: the
// options' value (GenOptions) decides.
struct UnitSettings {
  // FSDP1: each FSDP state's own backward_prefetch (torch 2.6 _runtime_utils.py
  // _get_handle_to_prefetch reads the state whose hook runs).
  std::optional<BackwardPrefetch> backward_prefetch;
  // FSDP2 reshard_after_forward: `reshard` True or False, or `ranks` > 0 for an int.
  struct Reshard {
    bool reshard = true;
    int ranks = 0;
    bool operator==(const Reshard&) const = default;
  };
  std::optional<Reshard> reshard_after_forward;
  // FSDP2 set_modules_to_forward_prefetch / set_modules_to_backward_prefetch: the units, by
  // instance name, in the order given.
  std::optional<std::vector<std::string>> modules_to_forward_prefetch;
  std::optional<std::vector<std::string>> modules_to_backward_prefetch;
  bool operator==(const UnitSettings&) const = default;
};

struct FsdpUnit {
  std::string name;
  std::vector<GenParam> params;  // one flat parameter, or the module's own (flatten=False)
  // False for instances wrapped with mixed_precision=False (auto_wrap_bn): gathered, computed
  // and reduced in fp32 whatever the options say.
  bool mixed_precision = true;
  // False where the wrapper forces reshard_after_forward=False (auto_wrap_bn) or for the
  // outermost instance (disable_reshard_on_root); otherwise the option decides.
  bool reshard_after_forward = true;
  // The wrapper made its own process group (auto_wrap_bn at fairscale #633/#650): with
  // GroupLayout::kSharedBnOwn it gets a group object of its own, the others share one.
  bool own_group = false;
  UnitSettings settings = {};
};

// How a size grows with the batch's shape (batch size b, sequence length s), as the recorder
// fits it (tools/recorder/batch.py, --batch-sizes and --seq-lens): at (b, s) a tensor's bytes or
// a run's FLOPs are its value at the program's own (b0, s0) plus, for each term, its
// coefficient x (b - b0)^sample_power x (s - s0)^token_power. The terms are named by the suffix
// of their JSON keys (bytes_per_sample, flops_per_token2, ...): degree 1 in the batch size
// (each sample adds the same), 2 in the length (attention's s x s scores).
struct GrowthTerm {
  std::string_view suffix;
  int sample_power = 0;
  int token_power = 0;
};
inline constexpr std::array<GrowthTerm, 5> kGrowthTerms = {{{"per_sample", 1, 0},
                                                            {"per_token", 0, 1},
                                                            {"per_token2", 0, 2},
                                                            {"per_sample_token", 1, 1},
                                                            {"per_sample_token2", 1, 2}}};
// The coefficients, in kGrowthTerms' order; all zero: the same at every batch shape.
template <typename T>
using Growth = std::array<T, kGrowthTerms.size()>;

enum class OpKind {
  kGather,           // the instance's forward begins: all-gather its parameters
  kRun,              // an op or module runs: compute span, outputs, saved tensors
  kCheckpointBegin,  // an activation-checkpointed region begins; `saves` are what it keeps
  kCheckpointEnd,    // ... and ends: the region's runs are recomputed at the start of its backward
  kEndForward,       // the instance's forward ends: reshard if it does
};

// A tensor of the program: a model input or a run's output. Its gradient has its size.
struct ProgramTensor {
  std::string id;     // unique in the program
  Bytes bytes = 0;    // its storage's size (its gradient's size)
  std::string dtype;  // "fp32", "bf16", "bool", "int64", ...
  std::optional<std::vector<std::uint64_t>> shape;
  std::string name;
  std::optional<bool> requires_grad;  // outputs only; unset: derived (see Backward below)
  std::string alias;  // non-empty: shares that earlier tensor's storage (a view, in-place op)
  // With the program's `batch` or `seq`: how its bytes grow with the batch's shape (`bytes` are
  // at the program's own). Not negative as read; once ScaleBatch has put the program at
  // another shape, they are its derivatives there, which can be.
  Growth<std::int64_t> bytes_growth{};
};

// A tensor made by a run that no other run reads: a saved mask or statistic, an autocast
// weight copy, or a backward workspace.
struct NewTensor {
  Bytes bytes = 0;
  std::string dtype;
  std::optional<std::vector<std::uint64_t>> shape;
  std::string name;
  Growth<std::int64_t> bytes_growth{};  // as ProgramTensor's
};

// What a run's backward gives an input that requires grad (autograd's derivative formulas):
// a new tensor of its size (most ops), the gradient of the run's first output itself or a view
// of it (AddBackward0, views: no new memory), or nothing (a non-differentiable argument).
enum class InputGrad { kNew, kPass, kNone };

struct RunInput {
  std::string tensor;
  InputGrad grad = InputGrad::kNew;
};

// A saved tensor: a program tensor already made (`tensor`), or a new one only backward keeps.
struct SavedTensor {
  std::string tensor;  // non-empty: a reference, no new memory
  NewTensor fresh;     // otherwise
};

struct ForwardOp {
  OpKind kind = OpKind::kRun;
  std::size_t instance = 0;              // kGather, kEndForward
  std::string name;                      // kRun: "block0" gives spans "forward block0", ...
  double flops = 0;                      // kRun: forward FLOPs
  std::optional<double> backward_flops;  // kRun: unset: twice `flops`
  // kRun, with the program's `batch` or `seq`: how its FLOPs grow with the batch's shape,
  // forward and backward (unset: twice the forward's).
  Growth<double> flops_growth{};
  std::optional<Growth<double>> backward_flops_growth;
  std::vector<std::size_t> uses;       // kRun: instances whose parameters it computes with
  std::vector<RunInput> inputs;        // kRun
  std::vector<ProgramTensor> outputs;  // kRun
  std::vector<SavedTensor> saves;      // kRun, kCheckpointBegin (what the region keeps)
  // kCheckpointBegin: torch.utils.checkpoint's use_reentrant. False: the non-reentrant
  // implementation as torch 2.x runs it (the recompute stops early, see the emitter).
  bool reentrant = true;
  // kCheckpointBegin of a non-reentrant region: the recompute stops once every tensor the
  // region saves has been packed again (torch 2.6: set_checkpoint_early_stop, on by default;
  // later torch also checkpoint(early_stop=)). False: it reruns the whole region.
  bool early_stop = true;
  // kRun in a non-reentrant region: selective activation checkpointing's policy saved this call
  // (CheckpointPolicy.MUST_SAVE or PREFER_SAVE; torch 2.6 torch/utils/checkpoint.py,
  // _CachingTorchDispatchMode): its whole output, every tensor of it (its new saves too), is
  // cached in forward, pinning the storages, and the recompute takes it from the cache instead
  // of running it. What autograd saves of it goes when its last user's backward does; the rest
  // when the recompute ends, or, where the recompute stops before reaching it, with the region's
  // frame (reference/cuda_from_cpu.md 1.3, 1.4).
  bool policy_saved = false;
  std::vector<NewTensor> workspace;  // kRun: made in its backward, freed at its end
  // kRun: the parameters (a view's name, or a parameter without views) whose gradient this
  // run's backward makes, of instances in `uses`. Unset: the whole gradient of every instance
  // it uses is made at its backward if none is yet (programs without param_reads).
  std::optional<std::vector<std::string>> param_reads;
  // kRun: tensors the model's code keeps referenced (a Python variable) until this run has
  // run: each stays alive at least until then, past its last reader. What matters is a
  // checkpointed region's forward under no_grad, where nothing else keeps a tensor.
  std::vector<std::string> releases;
  // kRun: made by the post-forward hook of the end_forward before it (FSDP2's output casts,
  // gen/program_boundary_casts.h): the hook's own locals die after it. Set by the emitter's
  // rewrite of a program; a program file never carries it.
  bool in_post_forward_hook = false;

  double BackwardFlops() const { return backward_flops.value_or(2 * flops); }
};

// What a recorder measured in a real run of the same step; carried, shown, never predicted from.
struct MeasuredMark {
  std::string name;
  std::optional<std::uint64_t> iteration;
  Bytes allocated_bytes = 0;
};
struct MeasuredPhasePeak {
  std::string phase;
  std::optional<std::uint64_t> iteration;
  Bytes peak_allocated_bytes = 0;
};
struct Measured {
  std::optional<std::string> device, torch_version, note;
  std::optional<std::uint64_t> world_size, iterations;
  std::vector<MeasuredMark> marks;
  std::vector<MeasuredPhasePeak> phase_peaks;
};

// One call of a module's forward, as the recorder saw it (the program's "modules" key): the
// ops of `forward` it ran, [begin, end), without the gather and end_forward of the FSDP
// instance the module may be (FSDP's hooks are outside the module's own forward). Calls nest:
// two calls' ranges are disjoint or one holds the other. What `gen program --checkpoint CLASS`
// makes checkpointed regions of (gen/program_checkpoint.h).
struct ModuleCall {
  std::string name;  // "blocks.0", as named_modules() names it
  std::string type;  // its class, "Block"
  std::size_t begin = 0;
  std::size_t end = 0;
};

// The batch sizes (the program's "batch" key: "size") or sequence lengths ("seq": "length") a
// recorder ran the model at: the program's tensors are at `at`, and every tensor's bytes and
// every run's FLOPs grew as their Growth says at each of `checked` (the ops the same at each),
// so `gen program --batch-size N --seq-len L` puts them at any N and L from the smallest
// checked up (gen/program_batch.h).
struct RecordedSizes {
  std::uint64_t at = 0;
  std::vector<std::uint64_t> checked;  // ascending, `at` among them
};

// The device a recorder recorded the program for (the program's "target" key): a recording on
// meta or a CPU writes what the target's kernels save and allocate (tools/recorder/target.py).
// Informational: the program's tensors already say it; `gen program` names it in a note.
struct RecordedTarget {
  std::string device;                                            // "cuda" or "cpu"
  std::string gpu;                                               // "sm90", ...; empty when not said
  std::vector<std::pair<std::string, std::uint64_t>> attention;  // kernel -> runs
  std::vector<std::string> unmodelled;  // "what: why", each op whose target behaviour is not
  // The model's own casts to fp32 (x.float()) of tensors already fp32 in the recording: no-ops
  // there, a copy in a bf16 run, which then computes in fp32; the module classes that made them.
  std::uint64_t fp32_upcasts = 0;
  std::vector<std::string> fp32_upcast_modules;
  std::string json;  // the key as read, written back unchanged
};

// A model program (traces/README.md, "Model programs"; traces/program-v1.schema.json).
struct ModelProgram {
  std::string description;
  std::optional<DType> autocast;  // informational: the runs' activations are in this dtype
  std::optional<RecordedTarget> target;
  std::vector<FsdpUnit> units;
  // Made once at init and alive all run (the input batch); category activation; no grad.
  std::vector<ProgramTensor> inputs;
  std::vector<ForwardOp> forward;
  std::string loss;               // the tensor backward() is called on
  std::vector<std::string> held;  // kept by the training loop until the end of the iteration
  std::optional<Measured> measured;
  // The FSDP wrapping a recorded model already had (the program's "fsdp" key: implementation,
  // PyTorch's settings, per-instance differences): informational, the emitter does not read
  // it. Kept as its JSON text so that a program reads and writes back unchanged.
  std::optional<std::string> fsdp;
  // The optimizer the recorder was told the model trains with (the program's "optimizer" key:
  // name, and where given impl and weight_decay), checked by the reader and kept as its JSON
  // text; `gen program` takes it as --optimizer, --optimizer-impl and --weight-decay unless the
  // command line says otherwise.
  std::optional<std::string> optimizer;
  // Every module call of the forward but the root's, parents before their children (empty in
  // programs written before the recorder wrote them, and in the presets').
  std::vector<ModuleCall> module_calls;
  // Unset: recorded at one batch size (one sequence length), and no growth has a term of it.
  std::optional<RecordedSizes> batch;
  std::optional<RecordedSizes> seq;
  // The same model recorded in bf16, as a MixedPrecision run computes it (the program's
  // "low_precision" key: tools/record_program.py --mixed-precision): its own inputs, forward,
  // loss, held tensors, module calls, fits and target; the instances, wrapping and optimizer
  // are this model's. `--activation-dtype param-dtype` emits it in place of a cast of this one.
  std::shared_ptr<const ModelProgram> low_precision;
};

// The element size of a program dtype name ("fp32", "bool", "int64", ...); 0 if unknown.
Bytes ProgramDTypeSize(std::string_view dtype);
// Whether a program dtype is floating point (only those require grad).
bool IsFloatingDType(std::string_view dtype);

// Checks every reference of a program: tensor ids unique and defined before use, instance
// indexes in range, checkpoint regions well formed, the loss an output, gather/end_forward in
// pairs, module calls nested and holding both or neither op of each gather/end_forward pair. The
// error message starts with the JSON pointer of the culprit ("/forward/3/inputs/0: ").
Status ValidateProgram(const ModelProgram& model);

// Calls fn(tensor) on every tensor object the forward makes (a ProgramTensor or a NewTensor,
// const with a const model): runs' outputs, the fresh tensors runs save for backward, and their
// backward workspaces. What the program-wide what-ifs (precision, batch size) change.
template <typename Model, typename Fn>
void ForEachForwardTensor(Model& model, Fn&& fn) {
  for (auto& op : model.forward) {
    for (auto& output : op.outputs) fn(output);
    for (auto& save : op.saves) {
      if (save.tensor.empty()) fn(save.fresh);
    }
    for (auto& workspace : op.workspace) fn(workspace);
  }
}

// The classes of the program's module calls, in the order the forward first calls them.
std::vector<std::string> CallClasses(const ModelProgram& model);
// What a what-if on module classes (--checkpoint, --wrap) needs of the program: module calls
// ("record the model again to WHAT here" when it has none), and a call of each class in
// `classes` (the message names the classes there are, and the nearest to a typo).
Status CheckCallClasses(const ModelProgram& model, const std::vector<std::string>& classes,
                        std::string_view what);

// The bytes of one fp32 element: the gradients' fp32 copies, optimizer state, fp32 activations.
inline constexpr Bytes kFp32Size = 4;

// A product that saturates instead of wrapping, so an absurd configuration shows up as a size
// beyond kMaxSaneBytes (and is rejected) rather than as a small wrapped-around number.
std::uint64_t SaturatingProduct(std::initializer_list<std::uint64_t> factors);

}  // namespace bucketsim
