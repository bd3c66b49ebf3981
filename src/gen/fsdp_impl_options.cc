#include "gen/fsdp_impl_options.h"

#include <vector>

namespace bucketsim {

std::span<const FsdpImplOptions> FsdpImplOptionsTable() {
  static const std::vector<FsdpImplOptions> table = [] {
    std::vector<FsdpImplOptions> entries = {
        FairscaleFsdpOptions(),
        TorchFsdp1Options(),
        TorchFsdp2Options(),
    };
    // One entry per implementation, in the enum's order, so OptionsOf can index.
    BUCKETSIM_CHECK(entries.size() == FsdpImpls().size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      BUCKETSIM_CHECK(entries[i].impl == FsdpImpls()[i].impl);
      BUCKETSIM_CHECK(entries[i].params != nullptr && entries[i].describe != nullptr &&
                      entries[i].make != nullptr);
    }
    return entries;
  }();
  return table;
}

const FsdpImplOptions& OptionsOf(FsdpImpl impl) {
  return FsdpImplOptionsTable()[static_cast<std::size_t>(impl)];
}

}  // namespace bucketsim
