// The interconnect (API 2.3): communicators between the processes of one host over a POSIX shared-memory
// segment, as NCCL's SHM transport does. Each transfer is a task on an emu stream; the stream's worker moves
// the bytes through the segment and waits on its peers there, so the caller never blocks.
#include "internal.h"

#if EMU_DRIVER_HAS_COMM

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <unordered_set>

namespace emu {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x31626d6d6f63756dULL;  // layout version 1
constexpr size_t kSlotBytes = size_t(4) << 20;       // per rank and buffer set: collectives stage pieces here
constexpr size_t kMailBytes = size_t(1) << 20;       // per ordered pair of ranks: point-to-point chunks
constexpr int kMaxRanks = 64;
constexpr size_t kPage = 4096;

enum Kind : uint32_t { kBarrier = 1, kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter };

const char* kind_name(uint32_t kind) {
  switch (kind) {
    case kAllReduce: return "all_reduce";
    case kReduce: return "reduce";
    case kBroadcast: return "broadcast";
    case kAllGather: return "all_gather";
    case kReduceScatter: return "reduce_scatter";
    default: return "barrier";
  }
}

// What a rank is doing, so peers can check they agree (kind, count, type, operator, root).
struct Desc {
  uint32_t kind, datatype, op;
  int32_t root;
  uint64_t count, seq;
};

struct alignas(64) RankCtl {
  std::atomic<uint64_t> arrive;  // barriers this rank has reached
  std::atomic<int32_t> pid;      // 0 once the rank destroyed its communicator
  Desc desc[2];                  // by collective number parity: a fast rank writes the next one meanwhile
};

struct alignas(64) MailCtl {
  std::atomic<uint64_t> posted;  // chunks the sender put in the mailbox
  std::atomic<uint64_t> taken;   // chunks the receiver copied out
  uint64_t bytes;                // of the chunk in the mailbox
  uint64_t total;                // of the whole message, checked against the receive
};

struct Header {
  uint64_t magic;
  int32_t nranks;
  std::atomic<int32_t> joined;
  std::atomic<int32_t> aborted;  // 0; 1 while the first failing rank writes its message; 2 once written
  char abort_message[512];
};

size_t round_page(size_t n) { return (n + kPage - 1) / kPage * kPage; }

struct Layout {
  size_t ctl, mail, slots, mailboxes, total;
  explicit Layout(int n) {
    const size_t un = size_t(n);
    ctl = round_page(sizeof(Header));
    mail = ctl + round_page(sizeof(RankCtl) * un);
    slots = mail + round_page(sizeof(MailCtl) * un * un);
    mailboxes = slots + 2 * un * kSlotBytes;
    total = mailboxes + un * un * kMailBytes;
  }
};

}  // namespace

struct Comm {
  int rank = 0, nranks = 0, device = 0;
  unsigned timeout_ms = 0;
  std::string name;
  char* base = nullptr;
  size_t bytes = 0;
  Header* hdr = nullptr;
  RankCtl* ctl = nullptr;
  MailCtl* mail = nullptr;
  char* slots = nullptr;
  char* mailboxes = nullptr;
  // Touched only by the task running the communicator's transfers (one at a time, in queue order).
  uint64_t epoch = 0, pieces = 0, seq = 0;
  // Queue order across streams: a task runs when next_run reaches its ticket.
  std::mutex mu;
  std::condition_variable cv;
  uint64_t tickets = 0, next_run = 0, pending = 0;
  std::string failure;  // sticky, under mu

  char* slot(uint64_t set, int r) const { return slots + (size_t(set) * size_t(nranks) + size_t(r)) * kSlotBytes; }
  char* mailbox(int from, int to) const {
    return mailboxes + (size_t(from) * size_t(nranks) + size_t(to)) * kMailBytes;
  }
  MailCtl& box(int from, int to) const { return mail[size_t(from) * size_t(nranks) + size_t(to)]; }
};

namespace {

std::mutex g_comms_mu;
std::unordered_set<Comm*>& live_comms() {
  static auto* comms = new std::unordered_set<Comm*>();
  return *comms;
}

Comm* find_comm(emuComm_t handle, emuError_t* error) {
  auto* c = reinterpret_cast<Comm*>(handle);
  std::lock_guard<std::mutex> lock(g_comms_mu);
  if (c == nullptr || live_comms().count(c) == 0) {
    *error = fail(emuErrorInvalidResourceHandle, "unknown or destroyed communicator");
    return nullptr;
  }
  return c;
}

std::string failure_of(Comm* c) {
  std::lock_guard<std::mutex> lock(c->mu);
  return c->failure;
}

// Records the communicator's first failure and tells every peer (they fail at once instead of timing out).
std::string fail_comm(Comm* c, const std::string& message) {
  std::string text = "emu communicator rank " + std::to_string(c->rank) + "/" + std::to_string(c->nranks) + ": " +
                     message;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (c->failure.empty()) c->failure = text;
    text = c->failure;
  }
  int32_t expected = 0;
  if (c->hdr->aborted.compare_exchange_strong(expected, 1)) {
    std::snprintf(c->hdr->abort_message, sizeof(c->hdr->abort_message), "%s", text.c_str());
    c->hdr->aborted.store(2, std::memory_order_release);
  }
  return text;
}

std::string peer_abort_message(Comm* c) {
  for (int i = 0; i < 100000 && c->hdr->aborted.load(std::memory_order_acquire) != 2; ++i) std::this_thread::yield();
  return std::string(c->hdr->abort_message, strnlen(c->hdr->abort_message, sizeof(c->hdr->abort_message)));
}

// Whether a process runs: an exited one that its parent has not reaped yet (a zombie) counts as exited.
bool alive(int32_t pid) {
  if (kill(pid_t(pid), 0) != 0 && errno == ESRCH) return false;
  char path[64], buf[256];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", int(pid));
  const int fd = open(path, O_RDONLY);
  if (fd < 0) return true;  // no /proc: trust kill
  const ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return true;
  buf[n] = '\0';
  const char* paren = std::strrchr(buf, ')');  // "pid (comm) S ...": comm may hold spaces and parens
  return paren == nullptr || paren[1] == '\0' || (paren[2] != 'Z' && paren[2] != 'X');
}

// Waits for peers: spins (yielding the core) a while, then sleeps in short steps; checks that the peers it
// waits for live, that nobody aborted, and the communicator's timeout since the last progress.
class Waiter {
 public:
  Waiter(Comm* c, const char* what) : c_(c), what_(what), since_(Clock::now()) {}
  void progressed() {
    since_ = Clock::now();
    spins_ = 0;
  }
  // false (with the failure recorded) when the wait must end; peer is the rank waited for.
  bool idle(int peer) {
    ++spins_;
    if (spins_ < 256) {
      std::this_thread::yield();
      return true;
    }
    if ((spins_ & 15) == 0 && !healthy(peer)) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(spins_ < 4096 ? 5 : 100));
    return true;
  }
  const std::string& message() const { return message_; }

 private:
  // Nobody aborted; and, at most every 5 ms, the peer lives and the timeout has not passed.
  bool healthy(int peer) {
    if (c_->hdr->aborted.load(std::memory_order_acquire) != 0) {
      message_ = fail_comm(c_, std::string(what_) + " stopped: " + peer_abort_message(c_));
      return false;
    }
    const auto now = Clock::now();
    if (now - checked_ < std::chrono::milliseconds(5)) return true;
    checked_ = now;
    const int32_t pid = c_->ctl[peer].pid.load(std::memory_order_acquire);
    if (pid == 0) {
      message_ = fail_comm(c_, std::string(what_) + ": rank " + std::to_string(peer) +
                                   " left the communicator (destroyed it) without taking part");
      return false;
    }
    if (!alive(pid)) {
      message_ = fail_comm(c_, std::string(what_) + ": rank " + std::to_string(peer) + " (pid " +
                                   std::to_string(pid) + ") exited");
      return false;
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - since_).count();
    if (waited >= long(c_->timeout_ms)) {
      message_ = fail_comm(c_, std::string(what_) + ": timed out after " + std::to_string(waited) +
                                   " ms waiting for rank " + std::to_string(peer));
      return false;
    }
    return true;
  }

  Comm* c_;
  const char* what_;
  Clock::time_point since_, checked_;
  uint64_t spins_ = 0;
  std::string message_;
};

// Every rank reaches the barrier before any leaves it.
bool barrier(Comm* c, Waiter& w) {
  const uint64_t e = ++c->epoch;
  c->ctl[c->rank].arrive.store(e, std::memory_order_release);
  for (int j = 0; j < c->nranks; ++j) {
    while (c->ctl[j].arrive.load(std::memory_order_acquire) < e)
      if (!w.idle(j)) return false;
    w.progressed();
  }
  return true;
}

// ---- element types and reductions ----
size_t elem_size(emuDataType t) {
  switch (t) {
    case emuInt8: case emuUint8: case emuBool: return 1;
    case emuFloat16: case emuBfloat16: case emuInt16: return 2;
    case emuInt32: case emuFloat32: return 4;
    case emuInt64: case emuFloat64: return 8;
  }
  return 0;
}

const char* type_name(uint32_t t) {
  static const char* names[] = {"int8", "uint8", "int32", "int64", "float16", "float32", "float64", "bfloat16", "bool", "int16"};
  return t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do { ++e; m <<= 1; } while ((m & 0x400) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((m & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (man << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_half(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000;
  const int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t man = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return uint16_t(sign | 0x7c00 | (man ? 0x200 : 0));
  if (exp >= 31) return uint16_t(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10) return uint16_t(sign);
    man |= 0x800000;
    const uint32_t shift = uint32_t(14 - exp);
    uint32_t h = man >> shift;
    const uint32_t rest = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (h & 1))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = (uint32_t(exp) << 10) | (man >> 13);
  const uint32_t rest = man & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
  return uint16_t(sign | h);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffff) > 0x7f800000) return uint16_t((x >> 16) | 0x40);
  return uint16_t((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

template <typename T>
T combine(T a, T b, emuRedOp op) {
  switch (op) {
    case emuProd: return T(a * b);
    case emuMax: return a < b ? b : a;
    case emuMin: return b < a ? b : a;
    default: return T(a + b);
  }
}

template <typename T>
void reduce_typed(void* acc, const void* in, size_t n, emuRedOp op) {
  T* a = static_cast<T*>(acc);
  const T* b = static_cast<const T*>(in);
  for (size_t i = 0; i < n; ++i) a[i] = combine(a[i], b[i], op);
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void reduce_narrow(void* acc, const void* in, size_t n, emuRedOp op) {
  auto* a = static_cast<uint16_t*>(acc);
  const auto* b = static_cast<const uint16_t*>(in);
  for (size_t i = 0; i < n; ++i) a[i] = Store(combine(Load(a[i]), Load(b[i]), op));
}

void reduce_into(void* acc, const void* in, size_t n, emuDataType t, emuRedOp op) {
  switch (t) {
    case emuInt8: return reduce_typed<int8_t>(acc, in, n, op);
    case emuUint8: return reduce_typed<uint8_t>(acc, in, n, op);
    case emuInt16: return reduce_typed<int16_t>(acc, in, n, op);
    case emuInt32: return reduce_typed<int32_t>(acc, in, n, op);
    case emuInt64: return reduce_typed<int64_t>(acc, in, n, op);
    case emuFloat32: return reduce_typed<float>(acc, in, n, op);
    case emuFloat64: return reduce_typed<double>(acc, in, n, op);
    case emuFloat16: return reduce_narrow<half_to_float, float_to_half>(acc, in, n, op);
    case emuBfloat16: return reduce_narrow<bf16_to_float, float_to_bf16>(acc, in, n, op);
    case emuBool: {
      auto* a = static_cast<uint8_t*>(acc);
      const auto* b = static_cast<const uint8_t*>(in);
      const bool any = op == emuSum || op == emuMax || op == emuAvg;
      for (size_t i = 0; i < n; ++i) a[i] = any ? (a[i] || b[i]) : (a[i] && b[i]);
      return;
    }
  }
}

template <typename T>
void divide_typed(void* acc, size_t n, int by) {
  T* a = static_cast<T*>(acc);
  for (size_t i = 0; i < n; ++i) a[i] = T(a[i] / T(by));
}

void divide(void* acc, size_t n, emuDataType t, int by) {
  switch (t) {
    case emuInt8: return divide_typed<int8_t>(acc, n, by);
    case emuUint8: return divide_typed<uint8_t>(acc, n, by);
    case emuInt16: return divide_typed<int16_t>(acc, n, by);
    case emuInt32: return divide_typed<int32_t>(acc, n, by);
    case emuInt64: return divide_typed<int64_t>(acc, n, by);
    case emuFloat32: return divide_typed<float>(acc, n, by);
    case emuFloat64: return divide_typed<double>(acc, n, by);
    case emuFloat16: {
      auto* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < n; ++i) a[i] = float_to_half(half_to_float(a[i]) / float(by));
      return;
    }
    case emuBfloat16: {
      auto* a = static_cast<uint16_t*>(acc);
      for (size_t i = 0; i < n; ++i) a[i] = float_to_bf16(bf16_to_float(a[i]) / float(by));
      return;
    }
    case emuBool: return;
  }
}

// ---- collectives (run on the stream's worker) ----
struct Collective {
  Desc desc;
  emuDataType type;
  emuRedOp op;
  const char* send;
  char* recv;
};

std::string describe(const Desc& d) {
  std::string s = std::string(kind_name(d.kind)) + " of " + std::to_string(d.count) + " " + type_name(d.datatype);
  if (d.kind == kAllReduce || d.kind == kReduce || d.kind == kReduceScatter) s += " op " + std::to_string(d.op);
  if (d.kind == kReduce || d.kind == kBroadcast) s += " root " + std::to_string(d.root);
  return s;
}

// Posts this rank's descriptor, meets every peer, and checks they all run the same collective.
bool agree(Comm* c, const Desc& d, Waiter& w) {
  c->ctl[c->rank].desc[d.seq & 1] = d;
  if (!barrier(c, w)) return false;
  for (int j = 0; j < c->nranks; ++j) {
    const Desc& p = c->ctl[j].desc[d.seq & 1];
    if (p.kind != d.kind || p.count != d.count || p.datatype != d.datatype || p.op != d.op || p.root != d.root) {
      fail_comm(c, "collective #" + std::to_string(d.seq) + " does not match across ranks: rank " +
                       std::to_string(c->rank) + " runs " + describe(d) + ", rank " + std::to_string(j) + " runs " +
                       describe(p));
      return false;
    }
  }
  return true;
}

bool run_collective(Comm* c, const Collective& x) {
  Waiter w(c, kind_name(x.desc.kind));
  if (!agree(c, x.desc, w)) return false;
  const int n = c->nranks, me = c->rank;
  const size_t es = elem_size(x.type), count = x.desc.count;
  switch (x.desc.kind) {
    case kBarrier: return true;
    case kAllReduce:
    case kReduce: {
      const size_t piece = kSlotBytes / es;
      const bool gather = x.desc.kind == kAllReduce || x.desc.root == me;
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off), part = (pc + size_t(n) - 1) / size_t(n);
        const uint64_t set = c->pieces++ & 1;
        char* mine = c->slot(set, me);
        std::memcpy(mine, x.send + off * es, pc * es);
        if (!barrier(c, w)) return false;
        // This rank reduces its part of the piece over every rank's slot, in rank order, into its own slot.
        const size_t lo = std::min(pc, size_t(me) * part), hi = std::min(pc, lo + part);
        if (hi > lo) {
          char* acc = mine + lo * es;
          // One rank computes each part and every rank copies it: all ranks get the same bits.
          for (int j = 0; j < n; ++j)
            if (j != me) reduce_into(acc, c->slot(set, j) + lo * es, hi - lo, x.type, x.op);
          if (x.op == emuAvg) divide(acc, hi - lo, x.type, n);
        }
        if (!barrier(c, w)) return false;
        if (!gather) continue;
        for (int j = 0; j < n; ++j) {
          const size_t jl = std::min(pc, size_t(j) * part), jh = std::min(pc, jl + part);
          if (jh > jl) std::memcpy(x.recv + (off + jl) * es, c->slot(set, j) + jl * es, (jh - jl) * es);
        }
      }
      return true;
    }
    case kBroadcast: {
      const size_t piece = kSlotBytes / es;
      const int root = x.desc.root;
      if (me == root && x.send != x.recv && count > 0) std::memmove(x.recv, x.send, count * es);
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off);
        const uint64_t set = c->pieces++ & 1;
        if (me == root) std::memcpy(c->slot(set, root), x.send + off * es, pc * es);
        if (!barrier(c, w)) return false;
        if (me != root) std::memcpy(x.recv + off * es, c->slot(set, root), pc * es);
      }
      return true;
    }
    case kAllGather: {
      const size_t piece = kSlotBytes / es;
      for (size_t off = 0; off < count; off += piece) {
        const size_t pc = std::min(piece, count - off);
        const uint64_t set = c->pieces++ & 1;
        std::memcpy(c->slot(set, me), x.send + off * es, pc * es);
        if (!barrier(c, w)) return false;
        for (int j = 0; j < n; ++j) std::memcpy(x.recv + (size_t(j) * count + off) * es, c->slot(set, j), pc * es);
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
        if (!barrier(c, w)) return false;
        char* out = x.recv + off * es;
        std::memcpy(out, c->slot(set, 0) + size_t(me) * pc * es, pc * es);
        for (int j = 1; j < n; ++j) reduce_into(out, c->slot(set, j) + size_t(me) * pc * es, pc, x.type, x.op);
        if (x.op == emuAvg) divide(out, pc, x.type, n);
      }
      return true;
    }
  }
  return false;
}

// ---- point to point ----
struct P2P {
  bool send;
  char* buf;
  size_t bytes;
  int peer;
  size_t done = 0;
  bool finished = false;
};

bool run_p2p(Comm* c, std::vector<P2P>& ops) {
  Waiter w(c, "send/recv");
  size_t left = ops.size();
  while (left > 0) {
    bool progress = false;
    int waiting_for = -1;
    for (P2P& op : ops) {
      if (op.finished) continue;
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
        op.done += chunk;
        op.finished = op.done == op.bytes;
      } else {
        MailCtl& m = c->box(op.peer, c->rank);
        if (m.posted.load(std::memory_order_acquire) == m.taken.load(std::memory_order_relaxed)) {
          waiting_for = op.peer;
          continue;
        }
        if (m.total != op.bytes) {
          fail_comm(c, "recv from rank " + std::to_string(op.peer) + " expects " + std::to_string(op.bytes) +
                           " bytes, but that rank sends " + std::to_string(m.total));
          return false;
        }
        std::memcpy(op.buf + op.done, c->mailbox(op.peer, c->rank), m.bytes);
        op.done += m.bytes;
        m.taken.fetch_add(1, std::memory_order_release);
        op.finished = op.done == op.bytes;
      }
      progress = true;
      if (op.finished) --left;
    }
    if (progress) {
      w.progressed();
    } else if (!w.idle(waiting_for)) {
      return false;
    }
  }
  return true;
}

// ---- queueing ----
// Runs work on the stream in the communicator's queue order; a failed communicator fails the task at once.
emuError_t enqueue(Comm* c, Stream* s, std::function<bool()> work) {
  uint64_t ticket;
  {
    std::lock_guard<std::mutex> lock(c->mu);
    if (!c->failure.empty()) return fail(emuErrorCommFailure, c->failure);
    ticket = c->tickets++;
    ++c->pending;
  }
  return submit(s, [c, ticket, work = std::move(work)] {
    {
      std::unique_lock<std::mutex> lock(c->mu);
      c->cv.wait(lock, [c, ticket] { return c->next_run == ticket; });
    }
    bool ok = failure_of(c).empty() && work();
    std::string message = failure_of(c);
    {
      std::lock_guard<std::mutex> lock(c->mu);
      ++c->next_run;
      --c->pending;
    }
    c->cv.notify_all();
    if (ok) return 0;
    emuKernelSetErrorMessage(message.c_str());
    return 1;
  });
}

struct Checked {
  Comm* comm = nullptr;
  Stream* stream = nullptr;
};

emuError_t check_call(emuComm_t handle, emuStream_t stream, emuDataType type, Checked* out) {
  EMU_RUNTIME(rt);
  emuError_t err = emuSuccess;
  Comm* c = find_comm(handle, &err);
  if (c == nullptr) return err;
  if (elem_size(type) == 0) return fail(emuErrorInvalidValue, "unknown emuDataType " + std::to_string(int(type)));
  Stream* s = resolve_stream(rt, stream, &err);
  if (s == nullptr) return err;
  if (s->device->index != c->device)
    return fail(emuErrorInvalidValue, "the stream is on device " + std::to_string(s->device->index) +
                                          ", the communicator on device " + std::to_string(c->device));
  *out = Checked{c, s};
  return emuSuccess;
}

// A device buffer of the communicator's device: its host-side address (null for a null, empty buffer).
emuError_t buffer(Comm* c, const void* p, size_t bytes, const char* what, char** host) {
  *host = nullptr;
  if (bytes == 0) return emuSuccess;
  EMU_RUNTIME(rt);
  Device* d = nullptr;
  emuError_t err = translate(rt, p, bytes, what, host, &d);
  if (err != emuSuccess) return err;
  if (d->index != c->device)
    return fail(emuErrorInvalidValue, std::string(what) + " is on device " + std::to_string(d->index) +
                                          ", the communicator on device " + std::to_string(c->device));
  return emuSuccess;
}

emuError_t collective(emuComm_t handle, emuStream_t stream, Kind kind, const void* send, size_t send_bytes,
                      void* recv, size_t recv_bytes, size_t count, emuDataType type, emuRedOp op, int root) {
  Checked k;
  emuError_t err = check_call(handle, stream, type, &k);
  if (err != emuSuccess) return err;
  Comm* c = k.comm;
  if (op < emuSum || op > emuAvg) return fail(emuErrorInvalidValue, "unknown emuRedOp " + std::to_string(int(op)));
  if ((kind == kReduce || kind == kBroadcast) && (root < 0 || root >= c->nranks))
    return fail(emuErrorInvalidValue, "root " + std::to_string(root) + " is not a rank of " +
                                          std::to_string(c->nranks));
  char *s = nullptr, *r = nullptr;
  if ((err = buffer(c, send, send_bytes, "sendbuf", &s)) || (err = buffer(c, recv, recv_bytes, "recvbuf", &r)))
    return err;
  Collective x{Desc{uint32_t(kind), uint32_t(type), uint32_t(op), root, uint64_t(count), 0}, type, op, s, r};
  return enqueue(c, k.stream, [c, x]() mutable {
    x.desc.seq = c->seq++;
    return run_collective(c, x);
  });
}

struct Group {
  int depth = 0;
  emuComm_t comm = nullptr;
  emuStream_t stream = nullptr;
  std::vector<P2P> ops;
};

Group& group() {
  thread_local Group g;
  return g;
}

emuError_t flush_group(Group& g) {
  std::vector<P2P> ops = std::move(g.ops);
  g.ops.clear();
  if (ops.empty()) return emuSuccess;
  Checked k;
  emuError_t err = check_call(g.comm, g.stream, emuUint8, &k);
  if (err != emuSuccess) return err;
  return enqueue(k.comm, k.stream, [c = k.comm, ops]() mutable { return run_p2p(c, ops); });
}

emuError_t point_to_point(bool send, const void* buf, size_t count, emuDataType type, int peer, emuComm_t handle,
                          emuStream_t stream) {
  Checked k;
  emuError_t err = check_call(handle, stream, type, &k);
  if (err != emuSuccess) return err;
  Comm* c = k.comm;
  if (peer < 0 || peer >= c->nranks || peer == c->rank)
    return fail(emuErrorInvalidValue, "peer " + std::to_string(peer) + " is not another rank of " +
                                          std::to_string(c->nranks) + " (this is rank " + std::to_string(c->rank) +
                                          ")");
  const size_t bytes = count * elem_size(type);
  char* host = nullptr;
  if ((err = buffer(c, buf, bytes, send ? "sendbuf" : "recvbuf", &host))) return err;
  Group& g = group();
  if (!g.ops.empty() && (g.comm != handle || g.stream != stream))
    return fail(emuErrorInvalidValue, "every send and recv of a group must use one communicator and one stream");
  g.comm = handle;
  g.stream = stream;
  g.ops.push_back(P2P{send, host, bytes, peer});
  return g.depth == 0 ? flush_group(g) : emuSuccess;
}

std::string random_hex() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

void unmap(Comm* c) {
  if (c->base != nullptr) munmap(c->base, c->bytes);
  c->base = nullptr;
}

}  // namespace
}  // namespace emu

using emu::fail;

extern "C" {

emuError_t emuCommGetUniqueId(emuCommUniqueId* id) {
  if (id == nullptr) return fail(emuErrorInvalidValue, "id is null");
  static std::atomic<unsigned> counter{0};
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "/emu-comm-%d-%u-%s", int(getpid()), counter++,
                emu::random_hex().c_str());
  return emuSuccess;
}

emuError_t emuCommInitRank(emuComm_t* comm, int nranks, emuCommUniqueId id, int rank, unsigned timeout_ms) {
  if (comm == nullptr) return fail(emuErrorInvalidValue, "comm is null");
  if (nranks < 1 || nranks > emu::kMaxRanks)
    return fail(emuErrorInvalidValue, "nranks " + std::to_string(nranks) + " is not in 1.." +
                                          std::to_string(emu::kMaxRanks));
  if (rank < 0 || rank >= nranks)
    return fail(emuErrorInvalidValue, "rank " + std::to_string(rank) + " is not in 0.." + std::to_string(nranks - 1));
  const std::string name(id.internal, strnlen(id.internal, sizeof(id.internal)));
  if (name.rfind("/emu-comm-", 0) != 0 || name.size() >= sizeof(id.internal))
    return fail(emuErrorInvalidValue, "the unique id was not made by emuCommGetUniqueId");
  EMU_RUNTIME(rt);
  const emu::Layout layout(nranks);
  const auto deadline = emu::Clock::now() + std::chrono::milliseconds(timeout_ms);
  int fd = -1;
  if (rank == 0) {
    fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0) return fail(emuErrorCommFailure, "shm_open(" + name + "): " + std::strerror(errno));
    if (ftruncate(fd, off_t(layout.total)) != 0) {
      const std::string why = std::strerror(errno);
      close(fd);
      shm_unlink(name.c_str());
      return fail(emuErrorCommFailure, "cannot size the shared segment " + name + ": " + why);
    }
  } else {
    // Rank 0 creates the segment; wait for it (and for its header) within the timeout.
    for (;;) {
      fd = shm_open(name.c_str(), O_RDWR, 0600);
      struct stat st;
      if (fd >= 0 && fstat(fd, &st) == 0 && size_t(st.st_size) == layout.total) break;
      if (fd >= 0) close(fd);
      if (emu::Clock::now() >= deadline)
        return fail(emuErrorCommFailure, "rank " + std::to_string(rank) + " timed out after " +
                                             std::to_string(timeout_ms) + " ms waiting for rank 0 to create " + name +
                                             " (is rank 0 alive, and do all ranks agree on nranks=" +
                                             std::to_string(nranks) + "?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  void* base = mmap(nullptr, layout.total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    if (rank == 0) shm_unlink(name.c_str());
    return fail(emuErrorCommFailure, "cannot map " + name + ": " + std::strerror(errno));
  }
  auto c = std::make_unique<emu::Comm>();
  c->rank = rank;
  c->nranks = nranks;
  c->device = emu::current_device_index();
  c->timeout_ms = timeout_ms;
  c->name = name;
  c->base = static_cast<char*>(base);
  c->bytes = layout.total;
  c->hdr = reinterpret_cast<emu::Header*>(c->base);
  c->ctl = reinterpret_cast<emu::RankCtl*>(c->base + layout.ctl);
  c->mail = reinterpret_cast<emu::MailCtl*>(c->base + layout.mail);
  c->slots = c->base + layout.slots;
  c->mailboxes = c->base + layout.mailboxes;
  auto* magic = reinterpret_cast<std::atomic<uint64_t>*>(&c->hdr->magic);
  if (rank == 0) {
    c->hdr->nranks = nranks;  // the fresh segment is zeroed: counters start at 0
    magic->store(emu::kMagic, std::memory_order_release);
  } else {
    while (magic->load(std::memory_order_acquire) != emu::kMagic) {
      if (emu::Clock::now() >= deadline) {
        emu::unmap(c.get());
        return fail(emuErrorCommFailure, "timed out waiting for rank 0 to set up " + name);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (c->hdr->nranks != nranks) {
      const int theirs = c->hdr->nranks;
      emu::unmap(c.get());
      return fail(emuErrorCommFailure, "rank 0 made the communicator for " + std::to_string(theirs) +
                                           " ranks, rank " + std::to_string(rank) + " asks for " +
                                           std::to_string(nranks));
    }
  }
  c->ctl[rank].pid.store(int32_t(getpid()), std::memory_order_release);
  // The last rank to join removes the name: the mappings stay, and nothing is left in /dev/shm.
  if (c->hdr->joined.fetch_add(1) + 1 == nranks) shm_unlink(name.c_str());
  while (c->hdr->joined.load(std::memory_order_acquire) < nranks) {
    if (emu::Clock::now() >= deadline) {
      const int joined = c->hdr->joined.load();
      c->ctl[rank].pid.store(0);
      if (rank == 0) shm_unlink(name.c_str());
      emu::unmap(c.get());
      return fail(emuErrorCommFailure, "timed out after " + std::to_string(timeout_ms) + " ms: " +
                                           std::to_string(joined) + " of " + std::to_string(nranks) +
                                           " ranks joined " + name);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::lock_guard<std::mutex> lock(emu::g_comms_mu);
  emu::live_comms().insert(c.get());
  *comm = reinterpret_cast<emuComm_t>(c.release());
  return emuSuccess;
}

emuError_t emuCommDestroy(emuComm_t comm) {
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr) return err;
  {
    std::unique_lock<std::mutex> lock(c->mu);
    c->cv.wait(lock, [c] { return c->pending == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(emu::g_comms_mu);
    emu::live_comms().erase(c);
  }
  c->ctl[c->rank].pid.store(0, std::memory_order_release);
  emu::unmap(c);
  delete c;
  return emuSuccess;
}

emuError_t emuCommAbort(emuComm_t comm) {
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr) return err;
  emu::fail_comm(c, "aborted by emuCommAbort");
  return emuSuccess;
}

emuError_t emuCommCount(emuComm_t comm, int* nranks) {
  if (nranks == nullptr) return fail(emuErrorInvalidValue, "nranks is null");
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr) return err;
  *nranks = c->nranks;
  return emuSuccess;
}

emuError_t emuCommUserRank(emuComm_t comm, int* rank) {
  if (rank == nullptr) return fail(emuErrorInvalidValue, "rank is null");
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr) return err;
  *rank = c->rank;
  return emuSuccess;
}

emuError_t emuCommDevice(emuComm_t comm, int* device) {
  if (device == nullptr) return fail(emuErrorInvalidValue, "device is null");
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  if (c == nullptr) return err;
  *device = c->device;
  return emuSuccess;
}

const char* emuCommGetFailure(emuComm_t comm) {
  thread_local std::string text;
  emuError_t err = emuSuccess;
  emu::Comm* c = emu::find_comm(comm, &err);
  text = c == nullptr ? "unknown or destroyed communicator" : emu::failure_of(c);
  return text.c_str();
}

emuError_t emuCommAllReduce(const void* sendbuf, void* recvbuf, size_t count, emuDataType datatype, emuRedOp op,
                            emuComm_t comm, emuStream_t stream) {
  const size_t bytes = count * emu::elem_size(datatype);
  return emu::collective(comm, stream, emu::kAllReduce, sendbuf, bytes, recvbuf, bytes, count, datatype, op, 0);
}

emuError_t emuCommReduce(const void* sendbuf, void* recvbuf, size_t count, emuDataType datatype, emuRedOp op,
                         int root, emuComm_t comm, emuStream_t stream) {
  const size_t bytes = count * emu::elem_size(datatype);
  int rank = -1;
  if (emuCommUserRank(comm, &rank) != emuSuccess) return emuErrorInvalidResourceHandle;
  return emu::collective(comm, stream, emu::kReduce, sendbuf, bytes, recvbuf, rank == root ? bytes : 0, count,
                         datatype, op, root);
}

emuError_t emuCommBroadcast(const void* sendbuf, void* recvbuf, size_t count, emuDataType datatype, int root,
                            emuComm_t comm, emuStream_t stream) {
  const size_t bytes = count * emu::elem_size(datatype);
  int rank = -1;
  if (emuCommUserRank(comm, &rank) != emuSuccess) return emuErrorInvalidResourceHandle;
  return emu::collective(comm, stream, emu::kBroadcast, sendbuf, rank == root ? bytes : 0, recvbuf, bytes, count,
                         datatype, emuSum, root);
}

emuError_t emuCommAllGather(const void* sendbuf, void* recvbuf, size_t sendcount, emuDataType datatype,
                            emuComm_t comm, emuStream_t stream) {
  const size_t bytes = sendcount * emu::elem_size(datatype);
  int n = 0;
  if (emuCommCount(comm, &n) != emuSuccess) return emuErrorInvalidResourceHandle;
  return emu::collective(comm, stream, emu::kAllGather, sendbuf, bytes, recvbuf, bytes * size_t(n), sendcount,
                         datatype, emuSum, 0);
}

emuError_t emuCommReduceScatter(const void* sendbuf, void* recvbuf, size_t recvcount, emuDataType datatype,
                                emuRedOp op, emuComm_t comm, emuStream_t stream) {
  const size_t bytes = recvcount * emu::elem_size(datatype);
  int n = 0;
  if (emuCommCount(comm, &n) != emuSuccess) return emuErrorInvalidResourceHandle;
  return emu::collective(comm, stream, emu::kReduceScatter, sendbuf, bytes * size_t(n), recvbuf, bytes, recvcount,
                         datatype, op, 0);
}

emuError_t emuCommSend(const void* sendbuf, size_t count, emuDataType datatype, int peer, emuComm_t comm,
                       emuStream_t stream) {
  return emu::point_to_point(true, sendbuf, count, datatype, peer, comm, stream);
}

emuError_t emuCommRecv(void* recvbuf, size_t count, emuDataType datatype, int peer, emuComm_t comm,
                       emuStream_t stream) {
  return emu::point_to_point(false, recvbuf, count, datatype, peer, comm, stream);
}

emuError_t emuCommGroupStart(void) {
  ++emu::group().depth;
  return emuSuccess;
}

emuError_t emuCommGroupEnd(void) {
  emu::Group& g = emu::group();
  if (g.depth == 0) return fail(emuErrorInvalidValue, "emuCommGroupEnd without emuCommGroupStart");
  if (--g.depth > 0) return emuSuccess;
  return emu::flush_group(g);
}

}  // extern "C"

#endif  // EMU_DRIVER_HAS_COMM
