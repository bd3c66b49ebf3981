#include "gen/program_batch.h"

#include <string>
#include <utility>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// How an error names a tensor: a program tensor by its id, a saved or workspace one by its name.
std::string Label(const ProgramTensor& tensor) { return tensor.id; }
std::string Label(const NewTensor& tensor) {
  return tensor.name.empty() ? std::string("(a saved tensor)") : tensor.name;
}

// bytes + per_sample x (to - from), or an error naming the tensor when it would be negative or
// beyond a sane size.
Result<Bytes> Scaled(Bytes bytes, Bytes per_sample, std::uint64_t from, std::uint64_t to,
                     const std::string& what) {
  if (to >= from) {
    const std::uint64_t more = SaturatingProduct({per_sample, to - from});
    if (more > kMaxSaneBytes || bytes + more > kMaxSaneBytes) {
      return InvalidArgument(
          fmt::format("at batch size {} tensor '{}' would need more than 1 PiB", to, what));
    }
    return bytes + more;
  }
  const std::uint64_t less = per_sample * (from - to);  // from - to < from: no overflow here
  if (less > bytes) {
    return InvalidArgument(fmt::format(
        "tensor '{}' has {} B at batch size {} and {} B more per sample: none left at {}", what,
        bytes, from, per_sample, to));
  }
  return bytes - less;
}

}  // namespace

Result<BatchSummary> ScaleBatch(FsdpModel& model, std::uint64_t size) {
  if (!model.batch) {
    return InvalidArgument(
        "the program was recorded at one batch size: record it with tools/record_program.py "
        "--batch-sizes (a batch function that takes the size) to emit it at another");
  }
  const BatchSizes& batch = *model.batch;
  if (size < batch.checked.front()) {
    return InvalidArgument(fmt::format(
        "{} is below the smallest batch size the recording checked ({}): the model may run "
        "other ops there (at batch size 1 PyTorch can take a view where a larger batch copies); "
        "record at {} too",
        size, batch.checked.front(), size));
  }
  BatchSummary summary{batch.size, size, 0, 0};
  FsdpModel scaled = model;
  Status status = Status::Ok();
  const auto scale = [&](auto& tensor) {
    summary.bytes_before += tensor.bytes;
    if (status.ok() && tensor.bytes_per_sample != 0) {
      Result<Bytes> bytes =
          Scaled(tensor.bytes, tensor.bytes_per_sample, batch.size, size, Label(tensor));
      if (bytes.ok()) {
        tensor.bytes = *bytes;
        tensor.shape.reset();
      } else {
        status = bytes.status();
      }
    }
    summary.bytes_after += tensor.bytes;
  };
  for (ProgramTensor& input : scaled.inputs) scale(input);  // the batch as loaded
  ForEachForwardTensor(scaled, scale);
  if (!status.ok()) return status;
  const double samples = static_cast<double>(size) - static_cast<double>(batch.size);
  for (ForwardOp& op : scaled.forward) {
    if (op.kind != OpKind::kRun) continue;
    if (op.backward_flops) {
      *op.backward_flops +=
          op.backward_flops_per_sample.value_or(2 * op.flops_per_sample) * samples;
    }
    op.flops += op.flops_per_sample * samples;
  }
  scaled.batch->size = size;
  scaled.description +=
      fmt::format("{}batch size {}", scaled.description.empty() ? "" : "; ", size);
  model = std::move(scaled);
  return summary;
}

}  // namespace bucketsim
