#include "gen/program_batch.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace bucketsim {
namespace {

__extension__ typedef __int128 Wide;  // exact bytes: a growth term times the shape's changes

// How an error names a tensor: a program tensor by its id, a saved or workspace one by its name.
std::string Label(const ProgramTensor& tensor) { return tensor.id; }
std::string Label(const NewTensor& tensor) {
  return tensor.name.empty() ? std::string("(a saved tensor)") : tensor.name;
}

// A value and its growth as the Taylor coefficients of one polynomial, [sample power][token
// power]: [0][0] is the value.
template <typename T>
using Coefficients = std::array<std::array<T, 3>, 2>;

template <typename T, typename G>
Coefficients<T> ToCoefficients(T value, const Growth<G>& growth) {
  Coefficients<T> c{};
  c[0][0] = value;
  for (std::size_t t = 0; t < kGrowthTerms.size(); ++t) {
    c[kGrowthTerms[t].sample_power][kGrowthTerms[t].token_power] = static_cast<T>(growth[t]);
  }
  return c;
}

template <typename T, typename G>
void ToGrowth(const Coefficients<T>& c, Growth<G>& growth) {
  for (std::size_t t = 0; t < kGrowthTerms.size(); ++t) {
    growth[t] = static_cast<G>(c[kGrowthTerms[t].sample_power][kGrowthTerms[t].token_power]);
  }
}

// The coefficients of the same polynomial about the point `samples` and `tokens` away (Taylor):
// c'[k][l] = sum over i >= k, j >= l of c[i][j] C(i,k) C(j,l) samples^(i-k) tokens^(j-l).
template <typename T>
Coefficients<T> Shift(const Coefficients<T>& c, T samples, T tokens) {
  static constexpr int kChoose[3][3] = {{1, 0, 0}, {1, 1, 0}, {1, 2, 1}};
  Coefficients<T> shifted{};
  for (int k = 0; k < 2; ++k) {
    for (int l = 0; l < 3; ++l) {
      for (int i = k; i < 2; ++i) {
        for (int j = l; j < 3; ++j) {
          T term = c[i][j] * static_cast<T>(kChoose[i][k] * kChoose[j][l]);
          for (int p = k; p < i; ++p) term *= samples;
          for (int p = l; p < j; ++p) term *= tokens;
          shifted[k][l] += term;
        }
      }
    }
  }
  return shifted;
}

// The dimension's change to `to` (none where `to` is 0 or the recorded value), or why the
// program cannot be put there.
Result<std::optional<BatchSummary::Change>> Move(const std::optional<RecordedSizes>& recorded,
                                                 std::uint64_t to, std::string_view what,
                                                 std::string_view flag, std::string_view function) {
  if (to == 0 || (recorded && to == recorded->at)) return std::optional<BatchSummary::Change>();
  if (!recorded) {
    return InvalidArgument(fmt::format(
        "the program was recorded at one {0}: record it with tools/record_program.py {1} (a "
        "batch function that takes {2}) to emit it at another",
        what, flag, function));
  }
  if (to < recorded->checked.front()) {
    return InvalidArgument(fmt::format(
        "{} is below the smallest {} the recording checked ({}): the model may run other ops "
        "there (at batch size 1 PyTorch can take a view where a larger batch copies); record at "
        "{} too",
        to, what, recorded->checked.front(), to));
  }
  return std::optional<BatchSummary::Change>(BatchSummary::Change{recorded->at, to});
}

// The change as a signed number (the shapes are at most 2^64 - 1 apart).
Wide Delta(const std::optional<BatchSummary::Change>& change) {
  if (!change) return 0;
  return static_cast<Wide>(change->to) - static_cast<Wide>(change->from);
}

// A tensor's bytes and growth at the shape `samples` and `tokens` away, exactly: first a bound
// on every product (the magnitudes' sums; beyond 2^100 none is sane and the exact sum could
// overflow), then the Wide sums. Changes nothing where it fails.
template <typename Tensor>
Status ScaleBytes(Tensor& tensor, const BatchSummary& summary, Wide samples, Wide tokens) {
  const auto magnitude = [](Wide v) { return static_cast<long double>(v < 0 ? -v : v); };
  Coefficients<long double> bound =
      ToCoefficients(static_cast<long double>(tensor.bytes), tensor.bytes_growth);
  for (auto& row : bound) {
    for (long double& c : row) c = std::fabs(c);
  }
  bound = Shift(bound, magnitude(samples), magnitude(tokens));
  const auto too_big = [&] {
    return InvalidArgument(fmt::format("at {} tensor '{}' would need more than 1 PiB",
                                       ShapeText(summary, ShapeSide::kTo), Label(tensor)));
  };
  if (bound[0][0] > std::ldexp(1.0L, 100)) return too_big();
  const Coefficients<Wide> exact =
      Shift(ToCoefficients(static_cast<Wide>(tensor.bytes), tensor.bytes_growth), samples, tokens);
  for (const auto& row : exact) {
    for (Wide c : row) {
      if (c > Wide{kMaxSaneBytes} || -c > Wide{kMaxSaneBytes}) return too_big();
    }
  }
  if (exact[0][0] < 0) {
    return InvalidArgument(fmt::format(
        "tensor '{}' has {} B at {} and would have less than none at {}", Label(tensor),
        tensor.bytes, ShapeText(summary, ShapeSide::kFrom), ShapeText(summary, ShapeSide::kTo)));
  }
  tensor.bytes = static_cast<Bytes>(exact[0][0]);
  ToGrowth(exact, tensor.bytes_growth);
  tensor.shape.reset();
  return Status::Ok();
}

}  // namespace

std::string ShapeText(const BatchSummary& summary, ShapeSide side) {
  std::string text;
  for (const auto& [what, change] :
       {std::pair("batch size", summary.size), std::pair("sequence length", summary.seq_len)}) {
    if (!change) continue;
    text += fmt::format("{}{} ", text.empty() ? "" : ", ", what);
    switch (side) {
      case ShapeSide::kFrom:
        text += std::to_string(change->from);
        break;
      case ShapeSide::kTo:
        text += std::to_string(change->to);
        break;
      case ShapeSide::kChange:
        text += fmt::format("{} -> {}", change->from, change->to);
        break;
    }
  }
  return text;
}

Result<BatchSummary> ScaleBatch(ModelProgram& model, BatchShape to) {
  BatchSummary summary;
  Result<std::optional<BatchSummary::Change>> size =
      Move(model.batch, to.size, "batch size", "--batch-sizes", "the size");
  if (!size.ok()) return size.status();
  Result<std::optional<BatchSummary::Change>> seq_len =
      Move(model.seq, to.seq_len, "sequence length", "--seq-lens", "seq_len=");
  if (!seq_len.ok()) return seq_len.status();
  summary.size = *size;
  summary.seq_len = *seq_len;
  const Wide samples = Delta(summary.size);
  const Wide tokens = Delta(summary.seq_len);

  if (!summary.size && !summary.seq_len) return summary;  // as recorded: nothing moves

  ModelProgram scaled = model;
  Status status = Status::Ok();
  const auto scale = [&](auto& tensor) {
    summary.bytes_before += tensor.bytes;
    if (status.ok() && std::any_of(tensor.bytes_growth.begin(), tensor.bytes_growth.end(),
                                   [](std::int64_t c) { return c != 0; })) {
      status = ScaleBytes(tensor, summary, samples, tokens);
    }
    summary.bytes_after += tensor.bytes;
  };
  for (ProgramTensor& input : scaled.inputs) scale(input);  // the batch as loaded
  ForEachForwardTensor(scaled, scale);
  if (!status.ok()) return status;
  const auto samples_d = static_cast<double>(samples);
  const auto tokens_d = static_cast<double>(tokens);
  for (ForwardOp& op : scaled.forward) {
    if (op.kind != OpKind::kRun) continue;
    if (op.backward_flops) {
      Growth<double> backward = op.backward_flops_growth.value_or(op.flops_growth);
      if (!op.backward_flops_growth) {
        for (double& c : backward) c *= 2;
      }
      const Coefficients<double> c =
          Shift(ToCoefficients(*op.backward_flops, backward), samples_d, tokens_d);
      op.backward_flops = std::max(0.0, c[0][0]);
      if (op.backward_flops_growth) ToGrowth(c, *op.backward_flops_growth);
    }
    const Coefficients<double> c =
        Shift(ToCoefficients(op.flops, op.flops_growth), samples_d, tokens_d);
    op.flops = std::max(0.0, c[0][0]);
    ToGrowth(c, op.flops_growth);
  }
  if (summary.size) scaled.batch->at = summary.size->to;
  if (summary.seq_len) scaled.seq->at = summary.seq_len->to;
  scaled.description += fmt::format("{}{}", scaled.description.empty() ? "" : "; ",
                                    ShapeText(summary, ShapeSide::kTo));
  model = std::move(scaled);
  return summary;
}

}  // namespace bucketsim
