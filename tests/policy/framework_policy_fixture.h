// A trace header for the framework policies' tests (DDP, ZeRO, Megatron, FSDP2 read the model's
// parameters from it): one process group of ranks {0, 1} (id 1) and the given FSDP instances,
// each a list of fp32 parameter numels (unsharded).
#pragma once

#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/trace_header.h"
#include "testing/recording_host.h"

namespace bucketsim::testing {

inline TraceHeader ModelHeader(const std::vector<std::vector<Numel>>& instances,
                               DType dtype = DType::kFloat32) {
  TraceHeader header;
  header.world_size = 2;
  header.groups.push_back(MakeGroup(1, {0, 1}));
  for (std::size_t f = 0; f < instances.size(); ++f) {
    UnitInfo instance;
    instance.name = fmt::format("fsdp{}", f);
    for (std::size_t p = 0; p < instances[f].size(); ++p) {
      instance.params.push_back({fmt::format("f{}.p{}", f, p), instances[f][p], dtype});
    }
    header.units.push_back(std::move(instance));
  }
  EXPECT_TRUE(header.Finalize().ok());
  return header;
}

}  // namespace bucketsim::testing
