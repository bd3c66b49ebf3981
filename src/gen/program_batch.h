// The batch's shape as a what-if on a model program (`gen program --batch-size N --seq-len L`):
// a program recorded at several batch sizes or sequence lengths (tools/record_program.py
// --batch-sizes, --seq-lens) carries, for every tensor and run, how it grows with the batch size
// and the length (Growth, gen/model_program.h), checked by the recorder to be exact at every
// shape it ran; this puts the program at another shape.
#ifndef BUCKETSIM_GEN_PROGRAM_BATCH_H_
#define BUCKETSIM_GEN_PROGRAM_BATCH_H_

#include <cstdint>
#include <optional>
#include <string>

#include "core/status.h"
#include "core/units.h"
#include "gen/model_program.h"

namespace bucketsim {

// The batch's shape: samples (the batch size) and tokens per sample (the sequence length);
// 0: as the program has it.
struct BatchShape {
  std::uint64_t size = 0;
  std::uint64_t seq_len = 0;
};

// What ScaleBatch changed: each dimension it moved (from, to), and the bytes of every tensor
// the program has (its inputs, what the forward makes and saves, backward workspaces), before
// and after.
struct BatchSummary {
  struct Change {
    std::uint64_t from = 0;
    std::uint64_t to = 0;
  };
  std::optional<Change> size;
  std::optional<Change> seq_len;
  Bytes bytes_before = 0;  // counted only where a dimension moves
  Bytes bytes_after = 0;
};

// The dimensions that move, each as `side` says it: "batch size 6, sequence length 128" (kTo),
// their values before (kFrom), or "batch size 2 -> 6, ..." (kChange).
enum class ShapeSide { kFrom, kTo, kChange };
std::string ShapeText(const BatchSummary& summary, ShapeSide side);

// Puts every tensor's bytes and every run's FLOPs at the shape `to` by their growth (backward
// FLOPs given explicitly by their own growth, by twice the forward's without it), and re-centres
// each growth there (its derivatives at the new shape), so that the program can be put at yet
// another shape; a tensor that grows loses its shape (which dimension grew is not recorded).
// Refused, changing nothing, for a dimension the program was recorded at one value of, for a
// value below the smallest one checked (the model may run other ops there: at batch size 1
// PyTorch can make a view where a larger batch copies), and where a tensor would need a negative
// or more than a sane number of bytes.
Result<BatchSummary> ScaleBatch(ModelProgram& model, BatchShape to);

}  // namespace bucketsim

#endif  // BUCKETSIM_GEN_PROGRAM_BATCH_H_
