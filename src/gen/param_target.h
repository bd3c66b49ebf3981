// The parameters a run's backward makes gradients for, as a program names them in
// `param_reads`: each view of a flat parameter, or a parameter without views. Shared by the
// program's checks (program_check.cc) and the emitter (fsdp_emitter.cc), so both resolve a name
// the same way.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "gen/model_program.h"

namespace bucketsim {

// A parameter whose gradient a run's backward makes: instance f, parameter p, and view v of
// it (0 for a parameter without views).
struct ParamTarget {
  std::size_t instance = 0;
  std::size_t param = 0;
  std::size_t view = 0;
};

// The gradient targets of an instance, by name: each view of a flat parameter, and each
// parameter without views.
template <typename Visit>
void ForEachTarget(const FsdpUnit& instance, std::size_t f, Visit visit) {
  for (std::size_t p = 0; p < instance.params.size(); ++p) {
    const GenParam& param = instance.params[p];
    if (param.views.empty()) {
      visit(param.name, ParamTarget{f, p, 0});
      continue;
    }
    for (std::size_t v = 0; v < param.views.size(); ++v) {
      visit(param.views[v].name, ParamTarget{f, p, v});
    }
  }
}

// A param_reads name among the targets of the instances a run uses; an error (no pointer) if
// none or several have it.
Result<ParamTarget> ResolveParamRead(const ModelProgram& model,
                                     const std::vector<std::size_t>& uses, std::string_view name);

}  // namespace bucketsim
