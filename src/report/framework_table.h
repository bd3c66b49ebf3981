// The cross-framework view of a comparison: for each policy, the framework whose gradient
// reduction it replays, that framework's own setting, and what it costs on this trace (peak
// memory, the collectives it issues and their bytes). Shown when the policies compared come
// from more than one framework (policy/policy_spec.h strategies).
#pragma once

#include <vector>

#include "engine/run_result.h"
#include "report/console_table.h"

namespace bucketsim {

bool SpansFrameworks(const std::vector<RunResult>& runs);
// Columns: policy, framework, setting, peak allocated, peak reserved, reduce buffers at the peak
// (bucket data and outputs, and the gradients a policy keeps: grad_shard), collectives by kind,
// bytes sent; bytes in `unit`.
Table BuildFrameworkTable(const std::vector<RunResult>& runs, ByteUnit unit = kMiBUnit);

}  // namespace bucketsim
