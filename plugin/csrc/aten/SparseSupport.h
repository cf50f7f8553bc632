// Whether emu tensors may have a sparse layout (EmuSparse.cpp: SparsePrivateUse1 and
// SparseCsrPrivateUse1 kernels, and the fallback bound to those keys). torch >= 2.5; the pre-2.5
// series sets 0: in torch 2.3 moving a sparse emu tensor to the CPU (`_to_copy`) calls
// copy_sparse_to_sparse_, which the fallback serves by moving it to the CPU again, recursing until
// the stack overflows. Without it, making a sparse emu tensor is torch's NotImplementedError.
#pragma once

#define EMU_HAS_SPARSE 1
