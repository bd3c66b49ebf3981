// What PyTorch's FSDP1 and FSDP2 options files share: their settings' spelling (torch dtypes,
// MixedPrecision's arguments, the 2-D device mesh), their description of a run, and their rule
// for process groups.
#pragma once

#include <string>
#include <string_view>

#include "core/dtype.h"
#include "core/status.h"
#include "gen/gen_options.h"

namespace bucketsim {

// "torch.bfloat16", ...
std::string_view TorchDType(DType dtype);
// MixedPrecision(...) / MixedPrecisionPolicy(...)'s arguments with the dtypes that differ from
// fp32 ("param_dtype=torch.bfloat16, reduce_dtype=torch.float32"), empty without mixed
// precision.
std::string MixedPrecisionArgs(const GenOptions& options);
// `init_device_mesh("cuda", (R, S))` with hybrid sharding, else empty.
std::string TorchDeviceMesh(const GenOptions& options);
// "PyTorch fsdp1 rank 0 of 8: FullyShardedDataParallel(module, ...), adam, 2 iterations".
std::string DescribeTorchFsdpOptions(const GenOptions& options);
// PyTorch's FSDP takes one process group for every unit (the default group or the mesh's):
// --groups shared or --hsdp-shape; fairscale's layouts are refused.
Status ValidateTorchProcessGroups(const GenOptions& options);

}  // namespace bucketsim
