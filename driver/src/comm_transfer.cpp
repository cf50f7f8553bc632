// The interconnect's transfers (API 2.3), run on an emu stream's worker: waits on peers that never hang (liveness,
// abort, timeout), barriers, the collectives over the shared slots, and grouped point-to-point through mailboxes.
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

#include <cerrno>
#include <cstring>
#include <thread>

#include "comm_internal.h"

#if EMU_DRIVER_HAS_COMM

namespace emu {

using comm::divide;
using comm::elem_size;
using comm::reduce_into;
using comm::type_name;

const char* kind_name(uint32_t kind) {
  switch (kind) {
    case kAllReduce:
      return "all_reduce";
    case kReduce:
      return "reduce";
    case kBroadcast:
      return "broadcast";
    case kAllGather:
      return "all_gather";
    case kReduceScatter:
      return "reduce_scatter";
    default:
      return "barrier";
  }
}

// The doorbell's futex is shared between processes (no FUTEX_PRIVATE_FLAG): the segment is mapped by each rank.
void ring(Comm* c) {
  c->hdr->bell.fetch_add(1);
  if (c->hdr->sleepers.load() != 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&c->hdr->bell), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

std::string failure_of(Comm* c) {
  std::lock_guard<std::mutex> lock(c->mu);
  return c->failure;
}

// Records the communicator's first failure and tells every peer (they fail at once instead of timing out).
std::string fail_comm(Comm* c, const std::string& message) {
  std::string text =
      "emu communicator rank " + std::to_string(c->rank) + "/" + std::to_string(c->nranks) + ": " + message;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->failure.empty())
      c->failure = text;
    text = c->failure;
  }
  int32_t expected = 0;
  if (c->hdr->aborted.compare_exchange_strong(expected, 1)) {
    std::snprintf(c->hdr->abort_message, sizeof(c->hdr->abort_message), "%s", text.c_str());
    c->hdr->aborted.store(2, std::memory_order_release);
    ring(c);
  }
  return text;
}

namespace {

std::string peer_abort_message(Comm* c) {
  for (int i = 0; i < 100000 && c->hdr->aborted.load(std::memory_order_acquire) != 2; ++i)
    std::this_thread::yield();
  return std::string(c->hdr->abort_message, strnlen(c->hdr->abort_message, sizeof(c->hdr->abort_message)));
}

// Whether a process runs: an exited one that its parent has not reaped yet (a zombie) counts as exited.
bool alive(int32_t pid) {
  if (kill(pid_t(pid), 0) != 0 && errno == ESRCH)
    return false;
  char path[64], buf[256];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
  const int fd = open(path, O_RDONLY);
  if (fd < 0)
    return true; // no /proc: trust kill
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0)
    return true;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')'); // "pid (comm) S ...": comm may hold spaces and parens
  return paren == nullptr || paren[1] == '\0' || (paren[2] != 'Z' && paren[2] != 'X');
}

// Waits for peers: spins briefly (a running peer answers within microseconds), then sleeps on the segment's
// doorbell until a peer rings it, waking at least every 2 ms to check that the peer it waits for lives, that nobody
// aborted, and the communicator's timeout since the last progress. Sleeping instead of yielding or polling leaves
// the cores to the ranks that have work, which is what an oversubscribed machine lacks.
class Waiter {
 public:
  Waiter(Comm* c, const char* what) : c_(c), what_(what), since_(Clock::now()), bell_(c->hdr->bell.load()) {}
  void progressed() {
    since_ = Clock::now();
    spins_ = 0;
  }
  // false (with the failure recorded) when the wait must end; peer is the rank waited for. The caller checks its
  // condition again after each true: a ring since the last call returns at once.
  bool idle(int peer) {
    const uint32_t bell = c_->hdr->bell.load();
    if (bell != bell_) {
      bell_ = bell;
      return true;
    }
    if (++spins_ < 128) {
      pause();
      return true;
    }
    if (!healthy(peer))
      return false;
    // Dekker's order with ring(): a sleeper is counted before the futex compares the bell, a ringer bumps the bell
    // before it reads the count, so either the futex sees the new bell or the ringer wakes the sleeper.
    c_->hdr->sleepers.fetch_add(1);
    const timespec step{0, 2000000};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&c_->hdr->bell), FUTEX_WAIT, bell, &step, nullptr, 0);
    c_->hdr->sleepers.fetch_sub(1);
    return true;
  }
  const std::string& message() const {
    return message_;
  }

 private:
  // Nobody aborted; and, at most every 5 ms, the peer lives and the timeout has not passed.
  bool healthy(int peer) {
    if (c_->hdr->aborted.load(std::memory_order_acquire) != 0) {
      message_ = fail_comm(c_, std::string(what_) + " stopped: " + peer_abort_message(c_));
      return false;
    }
    const auto now = Clock::now();
    if (now - checked_ < std::chrono::milliseconds(5))
      return true;
    checked_ = now;
    const int32_t pid = c_->ctl[peer].pid.load(std::memory_order_acquire);
    if (pid == 0) {
      message_ = fail_comm(
          c_,
          std::string(what_) + ": rank " + std::to_string(peer) +
              " left the communicator (destroyed it) without taking part");
      return false;
    }
    if (!alive(pid)) {
      message_ = fail_comm(
          c_, std::string(what_) + ": rank " + std::to_string(peer) + " (pid " + std::to_string(pid) + ") exited");
      return false;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count();
    if (waited >= long(c_->timeout_ms)) {
      message_ = fail_comm(
          c_,
          std::string(what_) + ": timed out after " + std::to_string(waited) + " ms waiting for rank " +
              std::to_string(peer));
      return false;
    }
    return true;
  }

  static void pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  Comm* c_;
  const char* what_;
  Clock::time_point since_, checked_;
  uint32_t bell_;
  uint64_t spins_ = 0;
  std::string message_;
};

// Every rank reaches the barrier before any leaves it.
bool barrier(Comm* c, Waiter& w) {
  const uint64_t e = ++c->epoch;
  c->ctl[c->rank].arrive.store(e, std::memory_order_release);
  ring(c);
  for (int j = 0; j < c->nranks; ++j) {
    while (c->ctl[j].arrive.load(std::memory_order_acquire) < e)
      if (!w.idle(j))
        return false;
    w.progressed();
  }
  return true;
}

// ---- collectives (run on the stream's worker) ----

std::string describe(const Desc& d) {
  std::string s = std::string(kind_name(d.kind)) + " of " + std::to_string(d.count) + " " + type_name(d.datatype);
  if (d.kind == kAllReduce || d.kind == kReduce || d.kind == kReduceScatter)
    s += " op " + std::to_string(d.op);
  if (d.kind == kReduce || d.kind == kBroadcast)
    s += " root " + std::to_string(d.root);
  return s;
}

// Posts this rank's descriptor, meets every peer, and checks they all run the same collective.
bool agree(Comm* c, const Desc& d, Waiter& w) {
  c->ctl[c->rank].desc[d.seq & 1] = d;
  if (!barrier(c, w))
    return false;
  for (int j = 0; j < c->nranks; ++j) {
    const Desc& p = c->ctl[j].desc[d.seq & 1];
    if (p.kind != d.kind || p.count != d.count || p.datatype != d.datatype || p.op != d.op || p.root != d.root) {
      fail_comm(
          c,
          "collective #" + std::to_string(d.seq) + " does not match across ranks: rank " + std::to_string(c->rank) +
              " runs " + describe(d) + ", rank " + std::to_string(j) + " runs " + describe(p));
      return false;
    }
  }
  return true;
}

} // namespace

bool run_collective(Comm* c, const Collective& x) {
  Waiter w(c, kind_name(x.desc.kind));
  if (!agree(c, x.desc, w))
    return false;
  const int n = c->nranks, me = c->rank;
  const size_t es = elem_size(x.type), count = x.desc.count;
  switch (x.desc.kind) {
    case kBarrier:
      return true;
    case kAllReduce:
    case kReduce: {
      const size_t piece = kSlotBytes / es;
      const bool gather = x.desc.kind == kAllReduce || x.desc.root == me;
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off), part = (pc + size_t(n) - 1) / size_t(n);
        const uint64_t set = c->pieces++ & 1;
        char* mine = c->slot(set, me);
        std::memcpy(mine, x.send + off * es, pc * es);
        if (!barrier(c, w))
          return false;
        // This rank reduces its part of the piece over every rank's slot, in rank order, into its own slot.
        const size_t lo = std::min(pc, size_t(me) * part), hi = std::min(pc, lo + part);
        if (hi > lo) {
          char* acc = mine + lo * es;
          // One rank computes each part and every rank copies it: all ranks get the same bits.
          for (int j = 0; j < n; ++j)
            if (j != me)
              reduce_into(acc, c->slot(set, j) + lo * es, hi - lo, x.type, x.op);
          if (x.op == emuAvg)
            divide(acc, hi - lo, x.type, n);
        }
        if (!barrier(c, w))
          return false;
        if (!gather)
          continue;
        for (int j = 0; j < n; ++j) {
          const size_t jl = std::min(pc, size_t(j) * part), jh = std::min(pc, jl + part);
          if (jh > jl)
            std::memcpy(x.recv + (off + jl) * es, c->slot(set, j) + jl * es, (jh - jl) * es);
        }
      }
      return true;
    }
    case kBroadcast: {
      const size_t piece = kSlotBytes / es;
      const int root = x.desc.root;
      if (me == root && x.send != x.recv && count > 0)
        std::memmove(x.recv, x.send, count * es);
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off);
        const uint64_t set = c->pieces++ & 1;
        if (me == root)
          std::memcpy(c->slot(set, root), x.send + off * es, pc * es);
        if (!barrier(c, w))
          return false;
        if (me != root)
          std::memcpy(x.recv + off * es, c->slot(set, root), pc * es);
      }
      return true;
    }
    case kAllGather: {
      const size_t piece = kSlotBytes / es;
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off);
        const uint64_t set = c->pieces++ & 1;
        std::memcpy(c->slot(set, me), x.send + off * es, pc * es);
        if (!barrier(c, w))
          return false;
        for (int j = 0; j < n; ++j)
          std::memcpy(x.recv + (size_t(j) * count + off) * es, c->slot(set, j), pc * es);
      }
      return true;
    }
    case kReduceScatter: {
      const size_t piece = kSlotBytes / es / size_t(n);
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off);
        const uint64_t set = c->pieces++ & 1;
        char* mine = c->slot(set, me);
        for (int b = 0; b < n; ++b)
          std::memcpy(mine + size_t(b) * pc * es, x.send + (size_t(b) * count + off) * es, pc * es);
        if (!barrier(c, w))
          return false;
        char* out = x.recv + off * es;
        std::memcpy(out, c->slot(set, 0) + size_t(me) * pc * es, pc * es);
        for (int j = 1; j < n; ++j)
          reduce_into(out, c->slot(set, j) + size_t(me) * pc * es, pc, x.type, x.op);
        if (x.op == emuAvg)
          divide(out, pc, x.type, n);
      }
      return true;
    }
  }
  return false;
}

// ---- point to point ----

bool run_p2p(Comm* c, std::vector<P2P>& ops) {
  Waiter w(c, "send/recv");
  size_t left = ops.size();
  while (left > 0) {
    bool progress = false;
    int waiting_for = -1;
    for (P2P& op : ops) {
      if (op.finished)
        continue;
      if (op.send) {
        MailCtl& m = c->box(c->rank, op.peer);
        if (m.posted.load(std::memory_order_acquire) != m.taken.load(std::memory_order_acquire)) {
          waiting_for = op.peer;
          continue;
        }
        const size_t chunk = std::min(kMailBytes, op.bytes - op.done);
        std::memcpy(c->mailbox(c->rank, op.peer), op.buf + op.done, chunk);
        m.bytes = chunk;
        m.total = op.bytes;
        m.posted.fetch_add(1, std::memory_order_release);
        ring(c);
        op.done += chunk;
        op.finished = op.done == op.bytes;
      } else {
        MailCtl& m = c->box(op.peer, c->rank);
        if (m.posted.load(std::memory_order_acquire) == m.taken.load(std::memory_order_relaxed)) {
          waiting_for = op.peer;
          continue;
        }
        if (m.total != op.bytes) {
          fail_comm(
              c,
              "recv from rank " + std::to_string(op.peer) + " expects " + std::to_string(op.bytes) +
                  " bytes, but that rank sends " + std::to_string(m.total));
          return false;
        }
        std::memcpy(op.buf + op.done, c->mailbox(op.peer, c->rank), m.bytes);
        op.done += m.bytes;
        m.taken.fetch_add(1, std::memory_order_release);
        ring(c);
        op.finished = op.done == op.bytes;
      }
      progress = true;
      if (op.finished)
        --left;
    }
    if (progress) {
      w.progressed();
    } else if (!w.idle(waiting_for)) {
      return false;
    }
  }
  return true;
}

} // namespace emu

#endif // EMU_DRIVER_HAS_COMM
