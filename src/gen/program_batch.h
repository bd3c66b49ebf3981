// The batch size as a what-if on a model program (`gen program --batch-size N`): a program
// recorded at several batch sizes (tools/record_program.py --batch-sizes) carries, for every
// tensor and run, how much each sample adds (bytes_per_sample, flops_per_sample), checked by
// the recorder to be exact at each size it ran; this puts the program at another size.
#ifndef BUCKETSIM_GEN_PROGRAM_BATCH_H_
#define BUCKETSIM_GEN_PROGRAM_BATCH_H_

#include <cstdint>

#include "core/status.h"
#include "core/units.h"
#include "gen/fsdp_program.h"

namespace bucketsim {

// What ScaleBatch changed: the bytes of every tensor the program has (its inputs, what the
// forward makes and saves, backward workspaces), before and after.
struct BatchSummary {
  std::uint64_t from = 0;
  std::uint64_t to = 0;
  Bytes bytes_before = 0;
  Bytes bytes_after = 0;
};

// Every tensor's bytes become bytes + bytes_per_sample x (size - the program's size), and every
// run's FLOPs likewise (backward FLOPs given explicitly scale by backward_flops_per_sample, by
// twice flops_per_sample without it); a tensor that grows loses its shape (which dimension is the
// batch is not recorded). Refused, changing nothing, for a program recorded at one batch size,
// for a size below the smallest one checked (the model may run other ops there: at batch size 1
// PyTorch can make a view where a larger batch copies), and where a tensor would need more than
// a sane size.
Result<BatchSummary> ScaleBatch(FsdpModel& model, std::uint64_t size);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_BATCH_H_
