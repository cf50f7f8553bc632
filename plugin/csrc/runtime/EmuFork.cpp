// The pthread_atfork child handler behind torch.emu._is_in_bad_fork().
#include "runtime/EmuFork.h"

#include <c10/util/Exception.h>
#include <pthread.h>

#include <atomic>

namespace torch_emu {

namespace {

std::atomic<bool> g_bad_fork{false};

void on_fork_child() {
  g_bad_fork.store(true);
}

// Registered when the extension loads: loading it starts the driver (device_count), so
// any later fork leaves the child without the driver's worker threads.
const int g_registered = pthread_atfork(nullptr, nullptr, &on_fork_child);

} // namespace

bool in_bad_fork() {
  return g_bad_fork.load(std::memory_order_relaxed);
}

void check_not_forked() {
  (void)g_registered;
  TORCH_CHECK(
      !in_bad_fork(),
      "Cannot re-initialize emu in forked subprocess. To use emu with multiprocessing, "
      "you must use the 'spawn' start method");
}

} // namespace torch_emu
