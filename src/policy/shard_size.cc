#include "policy/shard_size.h"

#include <cmath>

#include "core/status.h"

namespace bucketsim {

double PythonFloorDiv(double vx, double wx) {
  // CPython Objects/floatobject.c, _float_div_mod.
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) div -= 1.0;
  }
  double floordiv = 0.0;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  return floordiv;
}

Numel BucketShardSize(double bucket_cap_mb, Bytes element_size, int num_shards) {
  BUCKETSIM_CHECK(element_size > 0 && num_shards > 0);
  if (bucket_cap_mb <= 0) return 0;
  double bucket_size = bucket_cap_mb * 1024 * 1024 / static_cast<double>(element_size);
  return static_cast<Numel>(PythonFloorDiv(bucket_size, num_shards));
}

}  // namespace bucketsim
