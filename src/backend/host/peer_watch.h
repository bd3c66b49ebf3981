// Our own lost-rank detection for an MPI job (`bucketsim run`), whatever the launcher does: every
// rank tells every other rank, every heartbeat interval, that it is alive and the last trace
// event it reached. The heartbeat has its own thread and its own communicator (a duplicate of
// MPI_COMM_WORLD), so a rank blocked in a collective, or in a long compute span, still answers;
// a rank that is killed, stopped (SIGSTOP), swapped out or cut off does not. The job must end
// within the deadline (run's --timeout) of a lost peer's last heartbeat: a peer silent for the
// deadline less one interval (the check's granularity) and the grace (GraceFor: two intervals,
// in which the other survivors notice too) is lost, and every surviving rank gets "lost contact
// with rank K (no progress for T s; last seen at event E)" through `on_lost`, which must end the
// job after the grace.
// A rank that finishes says goodbye first, so a peer that is still writing its report does not
// take the silence for a loss.
//
// The collective watchdog of the host backend (host_backend.h) reads Peers() when a collective
// outlives --timeout: while a peer has stopped answering, the loss is this watch's to report
// (naming the rank) rather than the collective's; when every peer answers, the collective's
// timeout says so and names the rank furthest behind, if one is.
//
// Needs MPI_THREAD_MULTIPLE (the heartbeat calls MPI beside the replay's own calls); Start
// returns no watch without it. All-to-all heartbeats: (ranks - 1) messages of 16 bytes per rank
// per interval, nothing for a job of tens of ranks.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "core/units.h"

namespace bucketsim {

class PeerWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // The watch thread's name (/proc/PID/task/TID/comm): present once the watch runs.
  static constexpr const char* kThreadName = "peer-watch";

  struct Options {
    double deadline_s = 300;  // from a lost peer's last heartbeat to the job's end (--timeout)
    // Called once, from the watch's thread, with the message; must end the job.
    std::function<void(const std::string& message)> on_lost;
  };
  // What this rank knows of one peer.
  struct Peer {
    int rank = 0;
    double silent_s = 0;              // since its last heartbeat (0 once it said goodbye)
    std::optional<EventIndex> event;  // the last trace event it reported reaching
    bool finished = false;            // it said goodbye
  };

  // Collective over MPI_COMM_WORLD (it duplicates the communicator): every rank starts its
  // watch at the same point. Null, without error, on one rank or without MPI_THREAD_MULTIPLE.
  static Result<std::unique_ptr<PeerWatch>> Start(Options options);
  ~PeerWatch();  // says goodbye to every peer, stops the thread, frees the communicator
  PeerWatch(const PeerWatch&) = delete;
  PeerWatch& operator=(const PeerWatch&) = delete;

  // This rank's replay reached trace event `event` (the host backend: the event of each
  // collective it issues; any thread; the next heartbeat carries it).
  void Progress(EventIndex event);
  std::optional<EventIndex> progress() const;  // the last event this rank reported
  std::vector<Peer> Peers() const { return Peers(Clock::now()); }
  // Each peer's silence as of `now`.
  std::vector<Peer> Peers(Clock::time_point now) const;
  // How often heartbeats go out: a tenth of the deadline, at most 250 ms, at least 10 ms.
  static std::chrono::milliseconds IntervalFor(double deadline_s);
  // How long on_lost waits after saying so before it ends the job: two intervals.
  static std::chrono::milliseconds GraceFor(double deadline_s);
  // The silence after which a peer is lost: the deadline less an interval and the grace.
  static double SilenceLimitFor(double deadline_s);
  // A peer this much silent has missed heartbeats: it is stopping, not merely slow to answer.
  double missed_s() const;

  // "lost contact with rank 1 (no progress for 2.0 s; last seen at event 27)"
  static std::string LostMessage(const Peer& peer);

 private:
  PeerWatch(MPI_Comm comm, int rank, int size, Options options);
  void Loop();
  void SendAll(bool goodbye);
  void Receive();
  // Every peer counts as heard from at `now`: after this rank's own stall.
  void ForgiveSilence(Clock::time_point now);

  MPI_Comm comm_;
  int rank_;
  Options options_;
  std::chrono::milliseconds interval_;
  std::atomic<std::uint64_t> progress_{0};  // event + 1; 0: none yet

  struct PeerSlot {
    std::uint64_t send_buf[2] = {0, 0};  // {event + 1, goodbye}
    std::uint64_t recv_buf[2] = {0, 0};
    MPI_Request send = MPI_REQUEST_NULL;
    MPI_Request recv = MPI_REQUEST_NULL;
    Clock::time_point last_heard;
    std::uint64_t event_plus_one = 0;
    bool finished = false;
  };
  std::vector<PeerSlot> peers_;  // by rank; this rank's slot unused
  mutable std::mutex mutex_;     // the slots' last_heard, event and finished
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace bucketsim
