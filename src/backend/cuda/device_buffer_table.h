// The device buffers the cuda backend holds, by handle: their addresses, sizes, and the most
// bytes held at once. Which handles get memory is decided here too: every buffer a policy
// creates (bucket data and output, stack/cat/contiguous temporaries, bypass input and output),
// and the trace's own allocations only with --materialize all (they are accounted either way).
// Addresses are opaque here (no CUDA), so the bookkeeping is tested without a GPU.
#pragma once

#include <optional>
#include <unordered_map>
#include <vector>

#include "core/buffer_ops.h"
#include "core/units.h"

namespace bucketsim {

class DeviceBufferTable {
 public:
  struct Entry {
    void* address = nullptr;
    Bytes bytes = 0;
  };

  explicit DeviceBufferTable(bool materialize_trace_buffers)
      : materialize_trace_buffers_(materialize_trace_buffers) {}

  // Whether `handle` gets device memory. Zero-byte buffers get none (nothing reads them).
  bool Wants(BufferHandle handle, Bytes bytes) const;
  void Insert(BufferHandle handle, Entry entry);  // a handle already held is a bug
  // Removes and returns the entry, if the handle holds memory.
  std::optional<Entry> Take(BufferHandle handle);
  // The address of a held buffer; nullptr when the handle holds none.
  void* Find(BufferHandle handle) const;
  // Removes every entry (at shutdown) and returns them.
  std::vector<Entry> TakeAll();
  Bytes Size(BufferHandle handle) const;

  std::size_t held() const { return entries_.size(); }
  Bytes live_bytes() const { return live_bytes_; }
  Bytes peak_bytes() const { return peak_bytes_; }

 private:
  bool materialize_trace_buffers_;
  std::unordered_map<BufferHandle, Entry> entries_;
  Bytes live_bytes_ = 0;
  Bytes peak_bytes_ = 0;
};

}  // namespace bucketsim
