#include "backend/cuda/device_buffer_table.h"

#include <algorithm>

#include "core/status.h"

namespace bucketsim {

bool DeviceBufferTable::Wants(BufferHandle handle, Bytes bytes) const {
  if (bytes == 0) return false;
  return (handle & kTraceBufferBit) == 0 || materialize_trace_buffers_;
}

void DeviceBufferTable::Insert(BufferHandle handle, Entry entry) {
  bool inserted = entries_.emplace(handle, entry).second;
  BUCKETSIM_CHECK(inserted);  // the engine releases a handle before it reuses it
  live_bytes_ += entry.bytes;
  peak_bytes_ = std::max(peak_bytes_, live_bytes_);
}

std::optional<DeviceBufferTable::Entry> DeviceBufferTable::Take(BufferHandle handle) {
  auto it = entries_.find(handle);
  if (it == entries_.end()) return std::nullopt;
  Entry entry = it->second;
  entries_.erase(it);
  live_bytes_ -= entry.bytes;
  return entry;
}

void* DeviceBufferTable::Find(BufferHandle handle) const {
  auto it = entries_.find(handle);
  return it == entries_.end() ? nullptr : it->second.address;
}

std::vector<DeviceBufferTable::Entry> DeviceBufferTable::TakeAll() {
  std::vector<Entry> all;
  all.reserve(entries_.size());
  for (const auto& [handle, entry] : entries_) all.push_back(entry);
  entries_.clear();
  live_bytes_ = 0;
  return all;
}

Bytes DeviceBufferTable::Size(BufferHandle handle) const {
  auto it = entries_.find(handle);
  return it == entries_.end() ? 0 : it->second.bytes;
}

}  // namespace bucketsim
