#include "io/atomic_file.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace bucketsim {
namespace {

// The temporary files a signal handler must remove. A fixed table of fixed buffers: the handler
// may neither allocate nor follow a pointer the main thread might free. A slot is claimed
// (kFree -> kClaimed), filled, then published (kLive); only kLive slots are read by the handler.
constexpr int kSlots = 32;
constexpr std::size_t kMaxPath = 4096;
enum SlotState : int { kFree = 0, kClaimed = 1, kLive = 2 };

struct Slot {
  std::atomic<int> state{kFree};
  char path[kMaxPath];
};
std::array<Slot, kSlots> g_slots;

int Register(const std::string& temp_path) {
  if (temp_path.size() >= kMaxPath) return -1;
  for (int i = 0; i < kSlots; ++i) {
    int expected = kFree;
    if (!g_slots[i].state.compare_exchange_strong(expected, kClaimed)) continue;
    std::memcpy(g_slots[i].path, temp_path.c_str(), temp_path.size() + 1);
    g_slots[i].state.store(kLive);
    return i;
  }
  return -1;  // more than kSlots files open at once: removed by the destructor only
}

void Unregister(int slot) {
  if (slot >= 0) g_slots[slot].state.store(kFree);
}

// Who this process is, for the interrupt message ("rank 3" under mpirun); empty: nothing.
char g_label[64] = {};

void WriteStderr(std::string_view text) {
  while (!text.empty()) {
    ssize_t written = ::write(STDERR_FILENO, text.data(), text.size());
    if (written <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(written));
  }
}

extern "C" void OnInterrupt(int signal_number) {
  for (Slot& slot : g_slots) {
    if (slot.state.load() == kLive) ::unlink(slot.path);
  }
  // Only async-signal-safe calls here: unlink, write, _exit.
  WriteStderr("bucketsim: ");
  if (g_label[0] != '\0') {
    WriteStderr(g_label);
    WriteStderr(": ");
  }
  WriteStderr(signal_number == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)");
  WriteStderr("; no partial output is left\n");
  ::_exit(128 + signal_number);
}

std::atomic<unsigned> g_counter{0};

}  // namespace

Result<std::unique_ptr<AtomicFile>> AtomicFile::Create(const std::string& path) {
  std::filesystem::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), ec);
  // Hidden, beside the target (a rename across file systems would not be atomic), unique per
  // process and file.
  std::filesystem::path temp =
      target.parent_path() /
      fmt::format(".{}.{}-{}.tmp", target.filename().string(), ::getpid(), g_counter.fetch_add(1));
  int slot = Register(temp.string());
  std::unique_ptr<AtomicFile> file(new AtomicFile(path, temp.string(), slot));
  if (!file->out_) {
    int error = errno;
    file->Discard();
    return IoError(fmt::format("cannot write '{}': {}", path, std::strerror(error)));
  }
  return file;
}

AtomicFile::AtomicFile(std::string path, std::string temp_path, int slot)
    : path_(std::move(path)),
      temp_path_(std::move(temp_path)),
      slot_(slot),
      out_(temp_path_, std::ios::binary | std::ios::trunc) {}

AtomicFile::~AtomicFile() { Discard(); }

void AtomicFile::Discard() {
  if (!open_) return;
  open_ = false;
  out_.close();
  std::error_code ec;
  std::filesystem::remove(temp_path_, ec);
  Unregister(slot_);
}

Status AtomicFile::Commit() {
  BUCKETSIM_CHECK(open_);
  out_.flush();
  out_.close();
  if (!out_) {
    Discard();
    return IoError(fmt::format("cannot write '{}'", path_));
  }
  std::error_code ec;
  std::filesystem::rename(temp_path_, path_, ec);
  if (ec) {
    Discard();
    return IoError(fmt::format("cannot write '{}': {}", path_, ec.message()));
  }
  open_ = false;
  Unregister(slot_);
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view text) {
  Result<std::unique_ptr<AtomicFile>> file = AtomicFile::Create(path);
  if (!file.ok()) return file.status();
  (*file)->stream().write(text.data(), static_cast<std::streamsize>(text.size()));
  return (*file)->Commit();
}

void SetInterruptLabel(std::string_view label) {
  std::size_t size = std::min(label.size(), sizeof(g_label) - 1);
  std::memcpy(g_label, label.data(), size);
  g_label[size] = '\0';
}

void InstallInterruptHandlers() {
  struct sigaction action {};
  action.sa_handler = &OnInterrupt;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

}  // namespace bucketsim
