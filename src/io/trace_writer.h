// Writing trace format v1 (traces/README.md). A TraceWriter is an EventSink: put it at the end
// of a chain (the generator, a converter, a filter) and the events stream to a file. The header
// is pretty-printed; the events follow one per line, formatted directly (no JSON DOM), so
// million-event traces are written at disk speed. The output is a function of the input alone
// (byte-identical for identical input) and ReadTrace gives back the same header and events.
//
// The writer owns nothing of the header: it keeps a pointer to it from OnHeader until OnEnd,
// as EventSink allows, to look up the names events refer to.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "core/event_sink.h"
#include "core/status.h"
#include "core/trace_header.h"
#include "io/atomic_file.h"

namespace bucketsim {

class TraceWriter : public EventSink {
 public:
  // Writes to `out`, which must outlive the writer; `display_name` names it in messages.
  explicit TraceWriter(std::ostream& out, std::string display_name = "<stream>");
  // Opens `path` for writing ("-" = stdout); IoError when it cannot be created. The file
  // appears at `path` only when OnEnd succeeds (an AtomicFile).
  static Result<std::unique_ptr<TraceWriter>> Open(const std::string& path);

  Status OnHeader(const TraceHeader& header) override;
  Status OnEvent(const Event& event) override;
  // Closes the events array and flushes (and commits a file opened by Open); IoError when any
  // write failed.
  Status OnEnd() override;

 private:
  TraceWriter(std::unique_ptr<AtomicFile> file, std::string display_name);
  std::string_view EscapedName(std::uint32_t name);
  void AppendTime(const Event& e);
  Status FlushBuffer();

  std::unique_ptr<AtomicFile> file_;  // set when the writer opened the file itself
  std::ostream& out_;
  std::string display_name_;
  const TraceHeader* header_ = nullptr;
  std::vector<std::string> escaped_names_;  // JSON string literals of header_->names
  fmt::memory_buffer buffer_;
  EventIndex num_events_ = 0;
};

}  // namespace bucketsim
