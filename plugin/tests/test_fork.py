"""Fork safety: a child forked after emu started raises a clear error instead of hanging (as CUDA does).

Every child is bounded: a regression that hangs fails the test through a timeout, never hangs the suite.
"""

import multiprocessing
import warnings

import pytest
import torch

pytestmark = [
    pytest.mark.feature("fork_safety"),
    # Python >= 3.12 warns that forking a multi-threaded process may deadlock: that is what is tested here.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

CHILD_TIMEOUT_S = 60.0


def _run_in_forked_child(target, *args):  # type: ignore[no-untyped-def]
    """Runs target(queue, *args) in a forked child; returns what it put on the queue, or fails on a hang."""
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        child = ctx.Process(target=target, args=(queue, *args))
        child.start()
    child.join(CHILD_TIMEOUT_S)
    if child.is_alive():
        child.kill()
        child.join(10)
        pytest.fail(f"the forked child hung for {CHILD_TIMEOUT_S:.0f} s")
    assert child.exitcode == 0, f"the forked child exited with {child.exitcode}"
    return queue.get(timeout=10)


def _use_emu_in_child(queue, tensor) -> None:  # type: ignore[no-untyped-def]
    outcome = {"bad_fork": torch.emu._is_in_bad_fork(), "initialized": torch.emu.is_initialized()}
    for name, action in [
        ("cpu", tensor.cpu),
        ("new_tensor", lambda: torch.ones(2, device="emu")),
        ("synchronize", torch.emu.synchronize),
        ("lazy_init", torch.emu._lazy_init),
    ]:
        try:
            action()
            outcome[name] = "no error"
        except RuntimeError as exc:
            outcome[name] = str(exc)
    queue.put(outcome)


def test_child_raises_reinitialisation_error_instead_of_hanging():
    tensor = torch.arange(4.0, device="emu") * 2  # the runtime has run work before the fork
    torch.emu.synchronize()
    assert not torch.emu._is_in_bad_fork()
    outcome = _run_in_forked_child(_use_emu_in_child, tensor)
    assert outcome["bad_fork"] is True and outcome["initialized"] is False
    for name in ("cpu", "new_tensor", "synchronize", "lazy_init"):
        assert "Cannot re-initialize emu in forked subprocess" in outcome[name], (name, outcome[name])
    # The parent is untouched by its child's fork.
    assert not torch.emu._is_in_bad_fork()
    assert tensor.cpu().tolist() == [0.0, 2.0, 4.0, 6.0]


def _init_in_child(queue) -> None:  # type: ignore[no-untyped-def]
    try:
        torch.emu.init()
        queue.put("no error")
    except RuntimeError as exc:
        queue.put(str(exc))


def test_init_in_a_forked_child_is_refused_as_torch_cuda_refuses_it():
    """PyTorch's reference backend's test_device_poison_fork: init() in the parent, then in a forked child."""
    torch.emu.init()
    message = _run_in_forked_child(_init_in_child)
    assert message.startswith(
        "Cannot re-initialize emu in forked subprocess. To use emu with multiprocessing, you must use the 'spawn' "
        "start method"
    ), message
    torch.emu.init()  # the parent still may


class _Squares(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index) ** 2])


def test_dataloader_fork_workers_that_do_not_touch_emu():
    weights = torch.ones(1, device="emu")  # emu is in use in the parent
    loader = torch.utils.data.DataLoader(
        _Squares(), batch_size=4, num_workers=2, multiprocessing_context="fork", timeout=CHILD_TIMEOUT_S
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        batches = [(batch.emu() * weights).cpu() for batch in loader]
    assert torch.cat(batches).flatten().tolist() == [float(i) ** 2 for i in range(16)]
