#include "policy/direct_reduce_scatter.h"

namespace bucketsim {

Status DirectReduceScatter::ReduceScatter(const ReduceScatterCall& call, PolicyHost& host) {
  const Event& e = call.event;
  const int ws = call.group->size();
  const Bytes element = ElementSize(e.dtype);
  const Numel flat = ws * e.numel;  // the padded unsharded gradient: ws chunks of the shard
  // `new_sharded_grad = torch.empty_like(chunks[0])`, then the collective reads the gradient.
  const BufferId output =
      host.Allocate(e.numel * element, Category::kBypassOutput, e.dtype, call.group->id);
  const BufferId input = host.Stage(flat * element, e.dtype, call.group->id);
  host.FillGradient({input, e.index, 1, flat, e.dtype, 0, 0});
  const ReducedSlice slice{e.index, 0, flat};
  host.Collective({CollectiveKind::kReduceScatter, call.group->id, ws, e.dtype, flat, e.numel, 1},
                  {input, output, {&slice, 1}});
  host.Release(input);
  host.Deliver(call, output);
  host.Release(output);  // a local of _reduce_grad: the gradient keeps it (a view) or its cast
  ++counters_.bypasses;
  return Status::Ok();
}

}  // namespace bucketsim
