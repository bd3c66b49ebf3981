// Re-wrapping as a what-if on a model program (`gen program --wrap CLASS[,CLASS...]`): the FSDP
// instances made anew from the program's module calls, as FSDP's ModuleWrapPolicy (FSDP1) or
// fully_shard on each such module then the root (FSDP2) would make them from the model: the
// root, then every module of those classes, each owning the parameters of its modules that no
// inner instance owns; gathered where the module's forward begins, resharded where it ends.
#ifndef BUCKETSIM_GEN_PROGRAM_WRAP_H_
#define BUCKETSIM_GEN_PROGRAM_WRAP_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gen/model_program.h"

namespace bucketsim {

// "CLASS[,CLASS...]" (class names as type(module).__name__ gives them; "none": the root alone).
Result<std::vector<std::string>> ParseWrapClasses(std::string_view text);

// What RewrapModules made.
struct WrapSummary {
  std::size_t instances_before = 0;
  std::size_t instances_after = 0;  // the root included
};

// The program with instances: the root, then each call of a module of `classes` in forward
// order. A parameter belongs to the innermost such module whose name prefixes its own
// ("blocks.0.attn.q.weight" to "blocks.0.attn" before "blocks.0"), else to the root; within an
// instance the parameters are in the order the forward first calls their modules (which is
// named_parameters() order for a model that calls its modules in the order it defines them).
// A program recorded with flat parameters gets one flat parameter per instance, its views the
// parameters; else each parameter is its own. A unit that was one keeps its settings
// (mixed_precision, reshard_after_forward, own_group: the root's among them); a new one has the
// defaults. Each instance is gathered before its module's
// first op and resharded after its last (the root where it was); a run uses the instances whose
// parameters it makes gradients for (`param_reads`). Module calls are kept, in step.
// Refused, changing nothing: a program without module calls or without param_reads, a class no
// call has (the message lists those there are), a module of those classes called more than once
// (FSDP gathers a unit once per forward), and a wrapping whose program the checks refuse (a run
// that reads a parameter of a unit resharded before it, as a tied weight can).
Result<WrapSummary> RewrapModules(ModelProgram& model, const std::vector<std::string>& classes);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_WRAP_H_
