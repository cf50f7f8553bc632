// What the interconnect's files share (API 2.3): the shared segment's layout, the communicator, the transfers the
// stream runs, element types and reductions.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"

#if EMU_DRIVER_HAS_COMM

namespace emu {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kMagic = 0x32626d6d6f63756dULL; // layout version 2 (the header's doorbell)
constexpr size_t kSlotBytes = size_t(4) << 20; // per rank and buffer set: collectives stage pieces here
constexpr size_t kMailBytes = size_t(1) << 20; // per ordered pair of ranks: point-to-point chunks
constexpr int kMaxRanks = 64;
constexpr size_t kPage = 4096;

enum Kind : uint32_t { kBarrier = 1, kAllReduce, kReduce, kBroadcast, kAllGather, kReduceScatter };

const char* kind_name(uint32_t kind);

// What a rank is doing, so peers can check they agree (kind, count, type, operator, root).
struct Desc {
  uint32_t kind, datatype, op;
  int32_t root;
  uint64_t count, seq;
};

struct alignas(64) RankCtl {
  std::atomic<uint64_t> arrive; // barriers this rank has reached
  std::atomic<int32_t> pid; // 0 once the rank destroyed its communicator
  Desc desc[2]; // by collective number parity: a fast rank writes the next one meanwhile
};

struct alignas(64) MailCtl {
  std::atomic<uint64_t> posted; // chunks the sender put in the mailbox
  std::atomic<uint64_t> taken; // chunks the receiver copied out
  uint64_t bytes; // of the chunk in the mailbox
  uint64_t total; // of the whole message, checked against the receive
};

struct Header {
  uint64_t magic;
  int32_t nranks;
  std::atomic<int32_t> joined;
  std::atomic<int32_t> aborted; // 0; 1 while the first failing rank writes its message; 2 once written
  char abort_message[512];
  // Rung (incremented, sleepers woken through a futex on it) by every step a peer may wait for: a barrier arrival,
  // a mailbox posted or emptied, an abort. A waiter sleeps on it instead of polling.
  alignas(64) std::atomic<uint32_t> bell;
  std::atomic<uint32_t> sleepers;
};

// One rank's view of a communicator.
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
  std::string failure; // sticky, under mu

  char* slot(uint64_t set, int r) const {
    return slots + (size_t(set) * size_t(nranks) + size_t(r)) * kSlotBytes;
  }
  char* mailbox(int from, int to) const {
    return mailboxes + (size_t(from) * size_t(nranks) + size_t(to)) * kMailBytes;
  }
  MailCtl& box(int from, int to) const {
    return mail[size_t(from) * size_t(nranks) + size_t(to)];
  }
};

struct Collective {
  Desc desc;
  emuDataType type;
  emuRedOp op;
  const char* send;
  char* recv;
};

struct P2P {
  bool send;
  char* buf;
  size_t bytes;
  int peer;
  size_t done = 0;
  bool finished = false;
};

// Tells the peers that this rank made a step they may wait for (see Header::bell).
void ring(Comm* c);
// The communicator's first failure ("" while healthy).
std::string failure_of(Comm* c);
// Records the communicator's first failure, tells every peer through the segment, and returns the message.
std::string fail_comm(Comm* c, const std::string& message);
// Run on the stream's worker; false once the communicator failed (the reason is its failure).
bool run_collective(Comm* c, const Collective& x);
bool run_p2p(Comm* c, std::vector<P2P>& ops);

namespace comm {

// Bytes per element; 0 for a value that is no emuDataType.
size_t elem_size(emuDataType t);
const char* type_name(uint32_t t);
// acc[i] = acc[i] op in[i] for n elements.
void reduce_into(void* acc, const void* in, size_t n, emuDataType t, emuRedOp op);
// acc[i] /= by (emuAvg's last step; integer types truncate).
void divide(void* acc, size_t n, emuDataType t, int by);

} // namespace comm
} // namespace emu

#endif // EMU_DRIVER_HAS_COMM
