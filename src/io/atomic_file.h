// An output file that appears at its path only when it is complete. Every file bucketsim writes
// (reports, pages, charts, traces, Chrome traces, JUnit, time profiles) is written to a temporary
// file in the target's directory and renamed over the target when the writer commits, so a
// reader never sees half a file: after an error, a crash or Ctrl-C the target is either absent
// or the previous complete version. rename(2) within one directory is atomic on POSIX.
//
// Interruption: InstallInterruptHandlers() makes SIGINT and SIGTERM remove every temporary file
// still open (the handler only calls unlink(2), which is async-signal-safe) and end the process
// with 128 + the signal number (130, 143), as shells report a signalled process. Under mpirun
// this is also how a rank ends when the launcher tears the job down (Ctrl-C, a lost rank):
// Open MPI sends SIGTERM to every remaining rank before SIGKILL.
//
// An AtomicFile owns its temporary file: destroyed without Commit() it removes it. Streaming
// writers write to stream() as they go (TraceWriter, a streamed JSON report); whole texts go
// through WriteFileAtomically.
#pragma once

#include <fstream>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "core/status.h"

namespace bucketsim {

class AtomicFile {
 public:
  // Creates the target's missing parent directories and opens a new temporary file beside the
  // target; IoError naming the target when either fails.
  static Result<std::unique_ptr<AtomicFile>> Create(const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  std::ostream& stream() { return out_; }
  const std::string& path() const { return path_; }
  // Flushes, closes and renames the temporary file over the target. IoError (and the target
  // untouched, the temporary file removed) when any write failed.
  Status Commit();

 private:
  AtomicFile(std::string path, std::string temp_path, int slot);
  void Discard();

  std::string path_;
  std::string temp_path_;
  int slot_;  // in the interrupt registry; -1 when it was full
  std::ofstream out_;
  bool open_ = true;
};

// Writes `text` to `path` through an AtomicFile.
Status WriteFileAtomically(const std::string& path, std::string_view text);

// SIGINT and SIGTERM: remove the temporary files of every open AtomicFile, say so on stderr
// ("bucketsim: rank 1: terminated (SIGTERM); no partial output is left"), then _exit(128 + sig).
void InstallInterruptHandlers();
// Names this process in that message (`run` under mpirun: "rank 1"); at most 63 characters.
void SetInterruptLabel(std::string_view label);

}  // namespace bucketsim
