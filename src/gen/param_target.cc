#include "gen/param_target.h"

#include <string>

#include <fmt/format.h>

namespace bucketsim {

// A param_reads name among the targets of the instances a run uses; an error (no pointer) if
// none or several have it.
Result<ParamTarget> ResolveParamRead(const ModelProgram& model,
                                     const std::vector<std::size_t>& uses, std::string_view name) {
  std::vector<ParamTarget> found;
  for (std::size_t f : uses) {
    ForEachTarget(model.units[f], f, [&](const std::string& target, ParamTarget at) {
      if (target == name) found.push_back(at);
    });
  }
  if (found.size() == 1) return found.front();
  std::string instances;
  for (std::size_t f : uses) {
    instances += fmt::format("{}'{}'", instances.empty() ? "" : ", ", model.units[f].name);
  }
  if (found.empty()) {
    return InvalidArgument(fmt::format(
        "'{}' is no parameter (a view's name, or a parameter without views) of the instances "
        "the run uses ({})",
        name, instances.empty() ? "none" : instances));
  }
  return InvalidArgument(fmt::format(
      "'{}' names a parameter of more than one instance the run uses ({})", name, instances));
}

}  // namespace bucketsim
