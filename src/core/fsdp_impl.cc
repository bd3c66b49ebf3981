#include "core/fsdp_impl.h"

#include <array>

#include "core/status.h"

namespace bucketsim {
namespace {

constexpr std::array<FsdpImplInfo, 3> kImpls = {{
    {FsdpImpl::kFairscale, "fairscale", ""},
    {FsdpImpl::kFsdp1, "fsdp1", "fsdp1"},
    {FsdpImpl::kFsdp2, "fsdp2", "fsdp2"},
}};

}  // namespace

std::span<const FsdpImplInfo> FsdpImpls() { return kImpls; }

const FsdpImplInfo& InfoOf(FsdpImpl impl) {
  const std::size_t i = static_cast<std::size_t>(impl);
  BUCKETSIM_CHECK(i < kImpls.size() && kImpls[i].impl == impl);
  return kImpls[i];
}

std::string_view FsdpImplName(FsdpImpl impl) { return InfoOf(impl).name; }

std::optional<FsdpImpl> ParseFsdpImpl(std::string_view name) {
  for (const FsdpImplInfo& info : kImpls) {
    if (info.name == name) return info.impl;
  }
  return std::nullopt;
}

std::string FsdpImplChoices() {
  std::string text;
  for (std::size_t i = 0; i < kImpls.size(); ++i) {
    text += i == 0 ? "" : i + 1 == kImpls.size() ? " or " : ", ";
    text += kImpls[i].name;
  }
  return text;
}

}  // namespace bucketsim
