#include "backend/host/peer_watch.h"

#include <pthread.h>

#include <algorithm>

#include <fmt/format.h>

#include "backend/host/mpi_check.h"
#include "backend/host/stall_detector.h"

namespace bucketsim {
namespace {

// The heartbeat's tag on the watch's own communicator (nothing else is sent there).
constexpr int kHeartbeatTag = 7041;

}  // namespace

Result<std::unique_ptr<PeerWatch>> PeerWatch::Start(Options options) {
  int size = 1;
  int rank = 0;
  int thread_level = MPI_THREAD_SINGLE;
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_size(MPI_COMM_WORLD, &size));
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Query_thread(&thread_level));
  // The same answer on every rank (one library, one launch), so either all dup or none does.
  if (size < 2 || thread_level < MPI_THREAD_MULTIPLE || options.deadline_s <= 0) {
    return std::unique_ptr<PeerWatch>();
  }
  MPI_Comm comm = MPI_COMM_NULL;
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
  // A send to a dead peer is silence, not a reason for MPI to end the job.
  BUCKETSIM_MPI_RETURN_IF_ERROR(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN));
  return std::unique_ptr<PeerWatch>(new PeerWatch(comm, rank, size, std::move(options)));
}

PeerWatch::PeerWatch(MPI_Comm comm, int rank, int size, Options options)
    : comm_(comm),
      rank_(rank),
      options_(std::move(options)),
      interval_(IntervalFor(options_.deadline_s)),
      peers_(static_cast<std::size_t>(size)) {
  const Clock::time_point now = Clock::now();
  for (int p = 0; p < size; ++p) {
    if (p == rank_) continue;
    PeerSlot& slot = peers_[static_cast<std::size_t>(p)];
    slot.last_heard = now;  // the dup above was collective: every peer was here just now
    MPI_Irecv(slot.recv_buf, 2, MPI_UINT64_T, p, kHeartbeatTag, comm_, &slot.recv);
  }
  thread_ = std::thread([this] { Loop(); });
}

PeerWatch::~PeerWatch() {
  stopping_ = true;
  thread_.join();
  SendAll(/*goodbye=*/true);
  // The goodbyes go out (or, to a peer that is gone, are given up after a second).
  const Clock::time_point give_up = Clock::now() + std::chrono::seconds(1);
  for (PeerSlot& slot : peers_) {
    int done = slot.send == MPI_REQUEST_NULL;
    while (!done && Clock::now() < give_up) {
      if (MPI_Test(&slot.send, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (slot.send != MPI_REQUEST_NULL) MPI_Request_free(&slot.send);
    if (slot.recv != MPI_REQUEST_NULL) {
      MPI_Cancel(&slot.recv);
      MPI_Wait(&slot.recv, MPI_STATUS_IGNORE);
    }
  }
  MPI_Comm_free(&comm_);
}

std::chrono::milliseconds PeerWatch::IntervalFor(double deadline_s) {
  return std::clamp<std::chrono::milliseconds>(
      std::chrono::milliseconds(static_cast<long>(deadline_s * 100)), std::chrono::milliseconds(10),
      std::chrono::milliseconds(250));
}

std::chrono::milliseconds PeerWatch::GraceFor(double deadline_s) {
  return 2 * IntervalFor(deadline_s);
}

double PeerWatch::SilenceLimitFor(double deadline_s) {
  return deadline_s -
         std::chrono::duration<double>(IntervalFor(deadline_s) + GraceFor(deadline_s)).count();
}

void PeerWatch::Progress(EventIndex event) { progress_.store(event + 1); }

std::optional<EventIndex> PeerWatch::progress() const {
  const std::uint64_t plus_one = progress_.load();
  if (plus_one == 0) return std::nullopt;
  return plus_one - 1;
}

double PeerWatch::missed_s() const { return 3 * std::chrono::duration<double>(interval_).count(); }

std::vector<PeerWatch::Peer> PeerWatch::Peers(Clock::time_point now) const {
  std::vector<Peer> peers;
  std::lock_guard lock(mutex_);
  for (std::size_t p = 0; p < peers_.size(); ++p) {
    if (static_cast<int>(p) == rank_) continue;
    const PeerSlot& slot = peers_[p];
    Peer peer;
    peer.rank = static_cast<int>(p);
    peer.finished = slot.finished;
    peer.silent_s =
        slot.finished ? 0 : std::chrono::duration<double>(now - slot.last_heard).count();
    if (slot.event_plus_one > 0) peer.event = slot.event_plus_one - 1;
    peers.push_back(peer);
  }
  return peers;
}

std::string PeerWatch::LostMessage(const Peer& peer) {
  return fmt::format("lost contact with rank {} (no progress for {:.1f} s; {})", peer.rank,
                     peer.silent_s,
                     peer.event ? fmt::format("last seen at event {}", *peer.event)
                                : std::string("last seen before its first collective"));
}

void PeerWatch::SendAll(bool goodbye) {
  const std::uint64_t progress = progress_.load();
  for (std::size_t p = 0; p < peers_.size(); ++p) {
    if (static_cast<int>(p) == rank_) continue;
    PeerSlot& slot = peers_[p];
    // One heartbeat in flight per peer: to a peer that stopped reading, nothing piles up.
    if (slot.send != MPI_REQUEST_NULL) {
      int done = 0;
      if (MPI_Test(&slot.send, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) continue;
    }
    slot.send_buf[0] = progress;
    slot.send_buf[1] = goodbye ? 1 : 0;
    if (MPI_Isend(slot.send_buf, 2, MPI_UINT64_T, static_cast<int>(p), kHeartbeatTag, comm_,
                  &slot.send) != MPI_SUCCESS) {
      slot.send = MPI_REQUEST_NULL;
    }
  }
}

void PeerWatch::Receive() {
  for (std::size_t p = 0; p < peers_.size(); ++p) {
    if (static_cast<int>(p) == rank_) continue;
    PeerSlot& slot = peers_[p];
    while (slot.recv != MPI_REQUEST_NULL) {
      int done = 0;
      if (MPI_Test(&slot.recv, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) break;
      {
        std::lock_guard lock(mutex_);
        slot.last_heard = Clock::now();
        slot.event_plus_one = slot.recv_buf[0];  // in order: MPI does not overtake
        slot.finished = slot.finished || slot.recv_buf[1] != 0;
      }
      if (MPI_Irecv(slot.recv_buf, 2, MPI_UINT64_T, static_cast<int>(p), kHeartbeatTag, comm_,
                    &slot.recv) != MPI_SUCCESS) {
        slot.recv = MPI_REQUEST_NULL;
      }
    }
  }
}

void PeerWatch::ForgiveSilence(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  for (PeerSlot& slot : peers_) slot.last_heard = now;
}

void PeerWatch::Loop() {
  pthread_setname_np(pthread_self(), kThreadName);  // `ps -L`, and the fault tests, see it
  StallDetector stall(StallDetector::LimitFor(options_.deadline_s));
  while (!stopping_) {
    // This rank was stalled: its peers' silence is counted from now (stall_detector.h).
    if (const Clock::time_point now = Clock::now(); stall.Stalled(now)) ForgiveSilence(now);
    SendAll(/*goodbye=*/false);
    Receive();
    // Judged at one instant, itself a tick: a stop of this rank anywhere in this round (in
    // Receive, or between the ticks) is a stall, forgiven, and a stop after `judged` does not
    // count, as silence is measured up to it. (Once in a fault test the stopped rank, woken by
    // the launcher's abort, blamed a peer for its own pause: it had been stopped after the first
    // tick of a round, and judged its peers on waking.)
    const Clock::time_point judged = Clock::now();
    if (stall.Stalled(judged)) ForgiveSilence(judged);
    for (const Peer& peer : Peers(judged)) {
      if (peer.finished || peer.silent_s <= SilenceLimitFor(options_.deadline_s)) continue;
      if (options_.on_lost) options_.on_lost(LostMessage(peer));
      return;  // on_lost ends the job; without one, the watch has said what it had to
    }
    std::this_thread::sleep_for(interval_);
  }
}

}  // namespace bucketsim
