// The values real backends put into every stacked gradient and the sums they expect back, so
// that each reduce-scatter can be checked element by element without sending anything extra
// (the method of fairscale's bucketer test: every rank fills a pattern all ranks can compute,
// and every output element is compared with the analytic sum).
//
// Rank r puts   RankTerm(r) + ColumnTerm(request, row, j)   at element j of row `row` of the
// gradient of request `request`. Row `row` is the chunk destined to group position `row`, so
// after a reduce-scatter the rank at position p holds, at element j of the request's slice,
//   sum over members m of RankTerm(m)  +  n * ColumnTerm(request, p, j).
// Every term is a small integer (RankTerm 1..4, ColumnTerm 0..4), so sums up to 8n are exact in
// fp32 and fp64, and in fp16 and bf16 while they fit their 11 and 8 significant bits.
// Usable from CUDA device code: the cuda backend fills and checks on the device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BUCKETSIM_HOST_DEVICE __host__ __device__
#else
#define BUCKETSIM_HOST_DEVICE
#endif

namespace bucketsim {

BUCKETSIM_HOST_DEVICE inline int PatternRankTerm(int rank) { return rank % 4 + 1; }

BUCKETSIM_HOST_DEVICE inline int PatternColumnTerm(std::uint64_t request, int row,
                                                   std::uint64_t j) {
  return static_cast<int>((request * 31 + static_cast<std::uint64_t>(row) * 7 + j) % 5);
}

BUCKETSIM_HOST_DEVICE inline float PatternValue(int rank, std::uint64_t request, int row,
                                                std::uint64_t j) {
  return static_cast<float>(PatternRankTerm(rank) + PatternColumnTerm(request, row, j));
}

// What the rank at `position` of a group expects at element j of a request's reduced slice.
// `rank_term_sum` is the sum of PatternRankTerm over the group's members.
//
// Emulated collectives (a world of one standing in for n ranks) reduce the n rows of this
// rank's own input instead: sum over rows c of PatternValue(rank, request, c, j).
struct PatternExpectation {
  int members = 1;
  int position = 0;
  int rank = 0;
  int rank_term_sum = 1;
  bool emulated = false;

  BUCKETSIM_HOST_DEVICE float At(std::uint64_t request, std::uint64_t j) const {
    if (!emulated) {
      return static_cast<float>(rank_term_sum + members * PatternColumnTerm(request, position, j));
    }
    int sum = members * PatternRankTerm(rank);
    for (int row = 0; row < members; ++row) sum += PatternColumnTerm(request, row, j);
    return static_cast<float>(sum);
  }
};

}  // namespace bucketsim
