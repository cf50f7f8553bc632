// Fork safety: the driver's stream workers are threads, and threads do not survive fork(),
// so a forked child that queued work or waited on a stream would hang forever. A
// pthread_atfork child handler marks the child "in bad fork"; every path that reaches a
// stream or allocates device memory checks the mark first and raises, as CUDA does.
#pragma once

namespace torch_emu {

// True in a process forked from one where the emu runtime had started.
bool in_bad_fork();

// Raises "Cannot re-initialize emu in forked subprocess ..." in such a child.
void check_not_forked();

} // namespace torch_emu
