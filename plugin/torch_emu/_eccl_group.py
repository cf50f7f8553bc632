"""The eccl process group: c10d's collectives on emu tensors as calls of the driver's interconnect (through
torch.ops.torch_emu.comm_*), each queued on the current emu stream; CPU tensors go to a gloo group it keeps."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

import torch
import torch.distributed as dist

from torch_emu._eccl_work import EmuWork, WorkKeeper, _DoneWork, _KeptWork, _P2PWork, _WrappedWork
from torch_emu._library import ops as _ops
from torch_emu.distributed import BACKEND, DEVICE, available

_SUM, _PROD, _MAX, _MIN, _AVG = 0, 1, 2, 3, 4
_Kept = TypeVar("_Kept", bound=_KeptWork)
# torch.distributed exports AllgatherOptions from torch 2.2; c10d's module has it in every release.
_AllgatherOptions = torch._C._distributed_c10d.AllgatherOptions


def _red_op(op: Any) -> int:
    """The driver's reduction for a c10d ReduceOp (PREMUL_SUM is a sum of inputs scaled first: see _premul)."""
    kind = op.op if hasattr(op, "op") else op
    table = {
        dist.ReduceOp.SUM: _SUM,
        dist.ReduceOp.PRODUCT: _PROD,
        dist.ReduceOp.MAX: _MAX,
        dist.ReduceOp.MIN: _MIN,
        dist.ReduceOp.AVG: _AVG,
    }
    if kind in table:
        return table[kind]
    if _premul(op) is not None:
        return _SUM
    raise ValueError(
        f"eccl does not support the reduction {op} (sum, product, max, min, avg and premul_sum are supported)"
    )


def _premul(op: Any) -> float | torch.Tensor | None:
    """PREMUL_SUM's factor (a number, or a one-element tensor: dist._make_nccl_premul_sum, FSDP2's gradient divide
    factor), None for every other reduction. Releases whose ReduceOp does not expose the factor refuse it."""
    kind = op.op if hasattr(op, "op") else op
    if kind != getattr(dist.ReduceOp, "PREMUL_SUM", None):
        return None
    factor = getattr(op, "factor", None)
    if factor is None:
        raise ValueError(f"eccl: this torch's ReduceOp does not expose premul_sum's factor ({op})")
    return factor  # type: ignore[no-any-return]


@dataclass
class _P2P:
    send: bool
    tensor: torch.Tensor
    peer: int


@dataclass
class _Pending:
    """Point-to-point operations not yet handed to the driver: they go as one group (see _flush)."""

    ops: list[_P2P] = field(default_factory=list)
    device: torch.device | None = None


def _is_emu(tensors: Sequence[torch.Tensor]) -> bool:
    devices = {t.device.type for t in tensors}
    if devices == {DEVICE}:
        return True
    if DEVICE in devices:
        raise ValueError(f"eccl collective mixes devices {sorted(devices)}: all tensors must be on one device type")
    return False


def _real(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its real view (pairs of floats): the driver moves and sums those."""
    return torch.view_as_real(t) if t.is_complex() else t


def _pairs(first: Sequence[Any], second: Sequence[Any], what: str) -> list[tuple[Any, Any]]:
    """zip(first, second) of equal lengths (zip's strict= needs Python 3.10; torch 2.1's cells run 3.9)."""
    if len(first) != len(second):
        raise ValueError(f"eccl {what}: {len(first)} outputs for {len(second)} inputs")
    return list(zip(first, second))


def _contiguous(t: torch.Tensor, what: str) -> torch.Tensor:
    if not t.is_contiguous():
        raise ValueError(f"eccl: {what} must be contiguous (got strides {t.stride()} for shape {tuple(t.shape)})")
    return t


class ProcessGroupECCL(dist.ProcessGroup):
    """One group of ranks: a driver communicator per emu device it is used on, and a gloo group for CPU tensors."""

    def __init__(self, store: Any, rank: int, size: int, timeout: timedelta) -> None:
        super().__init__(rank, size)
        ok, why = available()
        if not ok:
            raise RuntimeError(f"the emu collective backend '{BACKEND}' is not available: {why}")
        self._store = store
        self._timeout = timeout
        self._comms: dict[int, int] = {}
        self._inits = 0
        self._pending = _Pending()
        self._keeper = WorkKeeper()
        # CPU tensors (object collectives, "cpu:gloo,emu:eccl"): a gloo group made now, while every rank makes its
        # group too (making it at the first CPU collective would work as well, but a late peer would fail it).
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("gloo/", store), rank, size, timeout)
        self._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, self._gloo)
        # Let DeviceMesh, FSDP2 and the object collectives see that this group serves emu tensors.
        self._register_backend(torch.device(DEVICE), dist.ProcessGroup.BackendType.CUSTOM, self._gloo)
        # c10d asks the default backend for the group's name (torch 2.15's flight recorder does at init): name one.
        if hasattr(self, "_set_default_backend"):
            self._set_default_backend(dist.ProcessGroup.BackendType.CUSTOM)

    # ---- identity ----
    def getBackendName(self) -> str:  # c10d's name for it
        return BACKEND

    def name(self) -> str:
        return BACKEND

    @property
    def options(self) -> Any:
        return None

    # ---- communicators ----
    def _comm(self, device: torch.device) -> int:
        index = device.index if device.index is not None else torch.emu.current_device()  # type: ignore[attr-defined]
        comm = self._comms.get(index)
        if comm is not None:
            return comm
        # As NCCL: rank 0 makes the id, the store carries it to the others. Every rank makes its communicator at its
        # first collective on the device, which all ranks issue in the same order.
        key = f"eccl/comm/{self._inits}"
        self._inits += 1
        if self.rank() == 0:
            uid = _ops.comm_unique_id()
            self._store.set(key, uid)
        else:
            uid = self._store.get(key).decode()
        timeout_ms = max(1, int(self._timeout.total_seconds() * 1000))
        comm = _ops.comm_init(uid, self.size(), self.rank(), index, min(timeout_ms, 2**31 - 1))
        self._comms[index] = comm
        return comm

    def _device_of(self, tensors: Sequence[torch.Tensor]) -> torch.device:
        device = tensors[0].device
        for t in tensors:
            if t.device != device:
                raise ValueError(f"eccl: a collective's tensors must share one device, got {t.device} and {device}")
        return device

    def _flush(self) -> None:
        """Hands the pending sends and receives to the driver as one group: the driver progresses them together, so
        isend/irecv pairs in any order (batch_isend_irecv, pipelines) never deadlock on each other."""
        pending, self._pending = self._pending, _Pending()
        if not pending.ops:
            return
        assert pending.device is not None
        comm = self._comm(pending.device)
        with torch.emu.device(pending.device):  # type: ignore[attr-defined]
            _ops.comm_group_start()
            try:
                for op in pending.ops:
                    if op.send:
                        _ops.comm_send(comm, op.tensor, op.peer)
                    else:
                        _ops.comm_recv(comm, op.tensor, op.peer)
            finally:
                _ops.comm_group_end()

    # Every work handed out is kept alive until waited for or its future is taken (see WorkKeeper).
    def _kept(self, work: _Kept) -> _Kept:
        work.kept_by(self._keeper)
        return work

    def _work(self, result: list[torch.Tensor], device: torch.device, blocking: bool = False) -> EmuWork:
        return self._kept(EmuWork(result, device, blocking))

    def _done(self, result: list[torch.Tensor]) -> EmuWork:
        return self._kept(_DoneWork(result))

    def _wrapped(self, inner: Any) -> dist.Work:
        return self._kept(_WrappedWork(inner))

    # ---- collectives ----
    def allreduce(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if not _is_emu(tensors):
            return self._wrapped(self._gloo.allreduce(tensors, opts or dist.AllreduceOptions()))
        self._flush()
        device = self._device_of(tensors)
        comm = self._comm(device)
        code, factor = _red_op(op), _premul(op)
        for tensor in tensors:
            _contiguous(tensor, "all_reduce tensor")
            if tensor.is_complex() and code not in (_SUM, _AVG):
                raise ValueError(f"eccl: {op} is not defined for complex tensors")
            if factor is not None:  # the input is the output: scaled in place on the stream, then summed
                tensor.mul_(factor)
            _ops.comm_all_reduce(comm, _real(tensor), code)
        return self._work(tensors, device)

    def allreduce_coalesced(self, tensors: list[torch.Tensor], opts: Any = None) -> dist.Work:
        options = dist.AllreduceOptions()
        if opts is not None:
            options.reduceOp = opts.reduceOp
        return self.allreduce(tensors, options)

    def broadcast(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        if not _is_emu(tensors):
            return self._wrapped(self._gloo.broadcast(tensors, opts))
        self._flush()
        device = self._device_of(tensors)
        comm = self._comm(device)
        for tensor in tensors:
            _ops.comm_broadcast(comm, _contiguous(_real(tensor), "broadcast tensor"), opts.rootRank)
        return self._work(tensors, device)

    def reduce(self, tensors: list[torch.Tensor], opts: Any) -> dist.Work:
        if not _is_emu(tensors):
            return self._wrapped(self._gloo.reduce(tensors, opts))
        self._flush()
        device = self._device_of(tensors)
        comm = self._comm(device)
        if _premul(opts.reduceOp) is not None:  # scaling in place would change a non-root rank's input
            raise ValueError("eccl: premul_sum is supported in all_reduce and reduce_scatter, not in reduce")
        code = _red_op(opts.reduceOp)
        for t in tensors:
            _ops.comm_reduce(comm, _contiguous(t, "reduce tensor"), code, opts.rootRank)
        return self._work(tensors, device)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        if not _is_emu([output, input]):
            return self._wrapped(self._gloo._allgather_base(output, input, opts or _AllgatherOptions()))
        self._flush()
        device = self._device_of([output, input])
        comm = self._comm(device)
        _ops.comm_all_gather(comm, _contiguous(output, "all_gather output"), _contiguous(input, "all_gather input"))
        return self._work([output], device)

    all_gather_single = _allgather_base

    def allgather(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        if not _is_emu([*inputs, *(t for outs in output_lists for t in outs)]):
            return self._wrapped(self._gloo.allgather(output_lists, inputs, opts or _AllgatherOptions()))
        self._flush()
        device = self._device_of(inputs)
        comm = self._comm(device)
        for outs, inp in _pairs(output_lists, inputs, "all_gather"):
            if len(outs) != self.size():
                raise ValueError(f"eccl all_gather: {len(outs)} output tensors for a group of {self.size()}")
            for t in outs:
                if t.shape != inp.shape or t.dtype != inp.dtype:
                    raise ValueError(
                        f"eccl all_gather: output {tuple(t.shape)} {t.dtype} does not match the input "
                        f"{tuple(inp.shape)} {inp.dtype}"
                    )
            # One device buffer for the gathered blocks, then device copies into the caller's tensors.
            flat = torch.empty((self.size(), *inp.shape), dtype=inp.dtype, device=device)
            _ops.comm_all_gather(comm, flat, _contiguous(inp, "all_gather input"))
            for j, t in enumerate(outs):
                t.copy_(flat[j])
        return self._work([t for outs in output_lists for t in outs], device)

    def allgather_coalesced(
        self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        # c10d's layout: output_lists[r][j] receives input j of rank r (allgather's is output_lists[j][r]).
        if len(output_lists) != self.size() or any(len(outs) != len(inputs) for outs in output_lists):
            raise ValueError(
                f"eccl all_gather_coalesced: needs {self.size()} output lists (one per rank) of {len(inputs)} tensors "
                f"(one per input), got {[len(outs) for outs in output_lists]}"
            )
        if not _is_emu([*inputs, *(t for outs in output_lists for t in outs)]):
            return self._wrapped(self._gloo.allgather_coalesced(output_lists, inputs, opts or _AllgatherOptions()))
        by_input = [[output_lists[r][j] for r in range(self.size())] for j in range(len(inputs))]
        return self.allgather(by_input, inputs, opts)

    def allgather_into_tensor_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        if not _is_emu([*outputs, *inputs]):
            for out, inp in _pairs(outputs, inputs, "coalesced collective"):
                self._gloo._allgather_base(out, inp).wait()
            return self._done(outputs)
        self._flush()
        device = self._device_of(outputs)
        comm = self._comm(device)
        for out, inp in _pairs(outputs, inputs, "coalesced collective"):
            _ops.comm_all_gather(comm, _contiguous(out, "all_gather output"), _contiguous(inp, "all_gather input"))
        return self._work(outputs, device)

    all_gather_single_coalesced = allgather_into_tensor_coalesced

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor, opts: Any = None) -> dist.Work:
        op = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        if not _is_emu([output, input]):
            return self._wrapped(self._gloo._reduce_scatter_base(output, input, opts or dist.ReduceScatterOptions()))
        self._flush()
        device = self._device_of([output, input])
        comm = self._comm(device)
        code, factor = _red_op(op), _premul(op)
        if factor is not None:  # the caller's input stays as it was: the scaled copy is a device buffer
            input = input * factor
        _ops.comm_reduce_scatter(
            comm, _contiguous(output, "reduce_scatter output"), _contiguous(input, "reduce_scatter input"), code
        )
        return self._work([output], device)

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_tensor_coalesced(
        self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None
    ) -> dist.Work:
        if not _is_emu([*outputs, *inputs]):
            for out, inp in _pairs(outputs, inputs, "coalesced collective"):
                self._gloo._reduce_scatter_base(out, inp, opts or dist.ReduceScatterOptions()).wait()
            return self._done(outputs)
        pairs = _pairs(outputs, inputs, "coalesced collective")
        works = [self._reduce_scatter_base(out, inp, opts) for out, inp in pairs]
        return works[-1] if works else self._done(outputs)

    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced

    def reduce_scatter(
        self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any = None
    ) -> dist.Work:
        if not _is_emu([*outputs, *(t for ins in input_lists for t in ins)]):
            return self._wrapped(self._gloo.reduce_scatter(outputs, input_lists, opts or dist.ReduceScatterOptions()))
        work: dist.Work = self._done(outputs)
        for out, ins in _pairs(outputs, input_lists, "reduce_scatter"):
            if len(ins) != self.size():
                raise ValueError(f"eccl reduce_scatter: {len(ins)} input tensors for a group of {self.size()}")
            flat = torch.stack([t.reshape(out.shape) for t in ins])  # one device buffer of the blocks
            work = self._reduce_scatter_base(out, flat, opts)
        return work

    def barrier(self, opts: Any = None) -> dist.Work:
        self._flush()
        # The device as ProcessGroupNCCL picks it: the caller's device_ids, else one this group already communicates
        # on (a process that never set its current device still meets its peers on the communicator it has),
        # else the current device.
        ids = list(getattr(opts, "device_ids", []) or [])
        if ids:
            index = ids[0]
        elif self._comms:
            index = next(iter(self._comms))
        else:
            index = torch.emu.current_device()  # type: ignore[attr-defined]
        device = torch.device(DEVICE, index)
        comm = self._comm(device)
        token = torch.empty(0, device=device)
        _ops.comm_all_reduce(comm, token, _SUM)
        return self._work([token], device, blocking=True)

    # ---- point to point ----
    def _queue_p2p(self, send: bool, tensors: list[torch.Tensor], peer: int) -> dist.Work:
        if not _is_emu(tensors):
            inner = self._gloo.send(tensors, peer, 0) if send else self._gloo.recv(tensors, peer, 0)
            return self._wrapped(inner)
        device = self._device_of(tensors)
        if self._pending.device not in (None, device):
            self._flush()
        self._pending.device = device
        for tensor in tensors:
            self._pending.ops.append(_P2P(send, _contiguous(_real(tensor), "send/recv tensor"), peer))
        return self._kept(_P2PWork(self, tensors, device))

    def send(self, tensors: list[torch.Tensor], dst: int, tag: int = 0) -> dist.Work:
        return self._queue_p2p(True, tensors, dst)

    def recv(self, tensors: list[torch.Tensor], src: int, tag: int = 0) -> dist.Work:
        return self._queue_p2p(False, tensors, src)

    def recv_anysource(self, tensors: list[torch.Tensor], tag: int = 0) -> dist.Work:
        raise RuntimeError("eccl: recv from any source is not supported (name the source rank)")

    def start_coalescing(self, device: torch.device) -> None:
        self._flush()

    def end_coalescing(self, device: torch.device) -> dist.Work:
        self._flush()
        return self._done([])

    def _exchange(self, sends: list[tuple[torch.Tensor, int]], recvs: list[tuple[torch.Tensor, int]]) -> None:
        """One driver group of sends and receives (all_to_all, gather, scatter)."""
        self._flush()
        for t, peer in sends:
            self._queue_p2p(True, [t], peer)
        for t, peer in recvs:
            self._queue_p2p(False, [t], peer)
        self._flush()

    def alltoall_base(
        self,
        output: torch.Tensor,
        input: torch.Tensor,
        output_split_sizes: list[int],
        input_split_sizes: list[int],
        opts: Any = None,
    ) -> dist.Work:
        if not _is_emu([output, input]):
            return self._wrapped(
                self._gloo.alltoall_base(
                    output, input, output_split_sizes, input_split_sizes, opts or dist.AllToAllOptions()
                )
            )
        n, me = self.size(), self.rank()
        device = self._device_of([output, input])

        def blocks(t: torch.Tensor, splits: list[int]) -> list[torch.Tensor]:
            if not splits:
                if t.shape[0] % n:
                    raise ValueError(f"eccl all_to_all: dim 0 of {tuple(t.shape)} does not split into {n} ranks")
                splits = [t.shape[0] // n] * n
            if len(splits) != n or sum(splits) != t.shape[0]:
                raise ValueError(f"eccl all_to_all: split sizes {splits} do not cover dim 0 of {tuple(t.shape)}")
            return list(torch.split(_contiguous(t, "all_to_all tensor"), splits))

        outs, ins = blocks(output, output_split_sizes), blocks(input, input_split_sizes)
        outs[me].copy_(ins[me])
        self._exchange(
            [(ins[j], j) for j in range(n) if j != me and ins[j].numel()],
            [(outs[j], j) for j in range(n) if j != me and outs[j].numel()],
        )
        return self._work([output], device)

    all_to_all_single = alltoall_base

    def alltoall(self, outputs: list[torch.Tensor], inputs: list[torch.Tensor], opts: Any = None) -> dist.Work:
        if not _is_emu([*outputs, *inputs]):
            return self._wrapped(self._gloo.alltoall(outputs, inputs, opts or dist.AllToAllOptions()))
        n, me = self.size(), self.rank()
        device = self._device_of([*outputs, *inputs])
        outputs[me].copy_(inputs[me])
        self._exchange(
            [(_contiguous(inputs[j], "all_to_all input"), j) for j in range(n) if j != me],
            [(_contiguous(outputs[j], "all_to_all output"), j) for j in range(n) if j != me],
        )
        return self._work(outputs, device)

    def gather(self, output_lists: list[list[torch.Tensor]], inputs: list[torch.Tensor], opts: Any) -> dist.Work:
        if not _is_emu([*inputs, *(t for outs in output_lists for t in outs)]):
            return self._wrapped(self._gloo.gather(output_lists, inputs, opts))
        n, me, root = self.size(), self.rank(), opts.rootRank
        device = self._device_of(inputs)
        [inp] = inputs
        if me == root:
            [outs] = output_lists
            outs[me].copy_(inp)
            self._exchange([], [(_contiguous(outs[j], "gather output"), j) for j in range(n) if j != me])
            return self._work(outs, device)
        self._exchange([(_contiguous(inp, "gather input"), root)], [])
        return self._work([inp], device)

    def scatter(self, outputs: list[torch.Tensor], input_lists: list[list[torch.Tensor]], opts: Any) -> dist.Work:
        if not _is_emu([*outputs, *(t for ins in input_lists for t in ins)]):
            return self._wrapped(self._gloo.scatter(outputs, input_lists, opts))
        n, me, root = self.size(), self.rank(), opts.rootRank
        device = self._device_of(outputs)
        [out] = outputs
        if me == root:
            [ins] = input_lists
            out.copy_(ins[me])
            self._exchange([(_contiguous(ins[j], "scatter input"), j) for j in range(n) if j != me], [])
        else:
            self._exchange([], [(_contiguous(out, "scatter output"), root)])
        return self._work([out], device)

    # ---- lifetime ----
    def abort(self) -> None:
        for comm in self._comms.values():
            _ops.comm_abort(comm)

    def shutdown(self) -> None:
        self._flush()
        self._keeper.clear()
        comms, self._comms = self._comms, {}
        for comm in comms.values():
            _ops.comm_destroy(comm)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown, or a failed communicator: nothing left to free
            self.shutdown()
