"""transfer_to_emu runs an unmodified CUDA-style script on emu."""

import subprocess
import sys
import textwrap

import pytest
from smoke_gates import (
    child_process_deep,
    requires_captured_backward,
    requires_graphs,
    requires_torch,
    requires_torch_save,
)

pytestmark = pytest.mark.feature("transfer_to_emu")

CUDA_SCRIPT = textwrap.dedent("""
    import torch
    import torch_emu.contrib.transfer_to_emu  # the only line a user adds

    assert torch.cuda.is_available()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = torch.nn.Linear(8, 2).cuda()
    x = torch.randn(4, 8, device="cuda")
    y = torch.zeros(4, 2, device=device)
    z = model(x) + y + torch.ones(4, 2).cuda()
    z = z.to("cuda:1")
    torch.cuda.synchronize()
    torch.cuda.manual_seed(0)
    print(
        model.weight.device, x.device, y.device, z.device, torch.cuda.device_count(), torch.cuda.memory_allocated() > 0
    )
""")


def test_cuda_script_runs_on_emu():
    done = subprocess.run([sys.executable, "-c", CUDA_SCRIPT], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["emu:0", "emu:0", "emu:0", "emu:1", "2", "True"]


def _run(script: str, *python_options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *python_options, "-c", textwrap.dedent(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


LOAD_SCRIPT = """
    import io
    import zipfile

    import torch
    import torch_emu.contrib.transfer_to_emu

    # torch.load(map_location=...) with strings, devices and dicts naming CUDA
    def saved(value, device="cpu"):
        buffer = io.BytesIO()
        torch.save({"w": value.to(device)}, buffer)
        return buffer.getvalue()

    data = saved(torch.arange(3.0))
    for location, expected in (("cuda", "emu:0"), ("cuda:1", "emu:1"), (torch.device("cuda", 1), "emu:1"),
                               ({"cpu": "cuda:1"}, "emu:1"), (None, "cpu")):
        loaded = torch.load(io.BytesIO(data), map_location=location)["w"]
        assert str(loaded.device) == expected and loaded.tolist() == [0.0, 1.0, 2.0], (location, loaded.device)

    # a checkpoint saved on CUDA (its storages tagged cuda:N) loads onto emu without map_location
    on_emu = io.BytesIO(saved(torch.arange(3.0), "emu:1"))
    as_cuda = io.BytesIO()
    with zipfile.ZipFile(on_emu) as source, zipfile.ZipFile(as_cuda, "w") as target:
        for item in source.infolist():
            payload = source.read(item)
            if item.filename.endswith("data.pkl"):
                assert b"X\\x05\\x00\\x00\\x00emu:1" in payload  # protocol 2's BINUNICODE: length, then text
                payload = payload.replace(b"X\\x05\\x00\\x00\\x00emu:1", b"X\\x06\\x00\\x00\\x00cuda:1")
            target.writestr(item, payload)
    as_cuda.seek(0)
    loaded = torch.load(as_cuda)["w"]
    assert str(loaded.device) == "emu:1" and loaded.tolist() == [0.0, 1.0, 2.0]
    print("loaded")
"""

MIGRATION_SCRIPT = """
    import torch
    import torch_emu.contrib.transfer_to_emu

    # torch.Generator("cuda") is an emu generator, and reproduces its draws
    first = torch.randn(5, device="cuda", generator=torch.Generator("cuda").manual_seed(7))
    again = torch.randn(5, device="cuda", generator=torch.Generator(device="cuda").manual_seed(7))
    assert torch.Generator("cuda").device == torch.device("emu", 0) and torch.equal(first, again)
    assert isinstance(torch.Generator(), torch.Generator) and isinstance(torch.default_generator, torch.Generator)

    # torch.cuda.memory_summary() reports emu's caching allocator
    keep = torch.empty(1 << 20, device="cuda")
    report = torch.cuda.memory_summary()
    assert "emu memory summary, device ID 0" in report and "Allocated memory" in report, report
    assert "from small pool" in report and "from small pool" not in torch.cuda.memory_summary(abbreviated=True)
    print("migrated")
"""


# torch 2.5 on Python 3.13 cannot torch.save even a CPU tensor (its Pickler's persistent_id is read-only there):
# that is torch's, so only the checkpoint half is gated; the generator and the memory summary run everywhere.
@requires_torch_save()
def test_load_maps_cuda_checkpoints_to_emu():
    done = _run(LOAD_SCRIPT, "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["loaded"]


@child_process_deep
def test_generator_and_memory_summary_map_to_emu():
    done = _run(MIGRATION_SCRIPT, "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["migrated"]


AMP_SCRIPT = """
    import warnings

    import torch
    import torch_emu.contrib.transfer_to_emu

    # autocast("cuda") and torch.cuda.amp.autocast compute in float16 on emu, as on CUDA
    a, b = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    with torch.autocast("cuda"):
        assert torch.is_autocast_enabled("cuda")
        assert torch.mm(a, b).dtype == torch.float16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates torch.cuda.amp.autocast itself
        with torch.cuda.amp.autocast(dtype=torch.bfloat16):
            assert torch.mm(a, b).dtype == torch.bfloat16
    assert torch.mm(a, b).dtype == torch.float32
    scaler = torch.amp.GradScaler("cuda")
    model = torch.nn.Linear(4, 4).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.autocast("cuda"):
        loss = model(a).float().sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    assert scaler._scale.device.type == "emu" and model.weight.device.type == "emu", scaler._scale
    print("amp")
"""


@child_process_deep
@requires_torch(">=2.4", "torch.autocast on a PrivateUse1 device")  # before 2.4 the device module drives it
def test_autocast_and_grad_scaler_map_to_emu():
    done = _run(AMP_SCRIPT, "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["amp"]


IMPORT_ONLY = """
import torch
import torch_emu.contrib.transfer_to_emu
print(torch.ones(1, device="cuda").device)
"""


@child_process_deep
def test_import_warning_is_said_once_and_a_documented_filter_silences_it(tmp_path):
    # "always": the count is the module's, not the warnings registry's once-per-location
    said = _run(IMPORT_ONLY + "import torch_emu.contrib.transfer_to_emu as again\n", "-W", "always")
    assert said.returncode == 0 and said.stdout.split() == ["emu:0"]
    assert said.stderr.count(": TransferToEmuWarning: torch_emu.contrib.transfer_to_emu:") == 1, said.stderr
    assert "ignore::torch_emu.contrib.TransferToEmuWarning" in said.stderr  # the message names its filter
    # With warnings as errors the import fails, unless the documented filter is given: Python's -W ...
    assert _run(IMPORT_ONLY, "-W", "error").returncode != 0
    silenced = _run(IMPORT_ONLY, "-W", "error", "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert silenced.returncode == 0 and silenced.stdout.split() == ["emu:0"] and not silenced.stderr, silenced.stderr
    # ... and pytest's filterwarnings, by category
    (tmp_path / "test_migrated.py").write_text(
        "import torch\nimport torch_emu.contrib.transfer_to_emu\n\n"
        "def test_cuda_is_emu():\n    assert torch.ones(1, device='cuda').device.type == 'emu'\n"
    )
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings =\n    error\n    ignore::torch_emu.contrib.TransferToEmuWarning\n"
    )
    suite = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert suite.returncode == 0, suite.stdout[-3000:]


GRAPH_SCRIPT = """
import torch
import torch_emu.contrib.transfer_to_emu

# torch.cuda.CUDAGraph and torch.cuda.graph capture and replay on emu
static_x = torch.zeros(4, 3, device="cuda")
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, pool=torch.cuda.graph_pool_handle()):
    assert torch.cuda.is_current_stream_capturing()
    static_y = static_x * 2 + 1
static_x.copy_(torch.ones(4, 3))
g.replay()
assert static_y.sum().item() == 36
print("replayed")
"""

GRAPHED_CALLABLES_SCRIPT = """
import copy

import torch
import torch_emu.contrib.transfer_to_emu

# torch.cuda.make_graphed_callables, torch's own, runs on emu through the mapped names
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).cuda()
twin = copy.deepcopy(model)
graphed = torch.cuda.make_graphed_callables(model, (torch.randn(32, 16, device="cuda"),))
for _ in range(3):
    model.zero_grad(set_to_none=True)
    twin.zero_grad(set_to_none=True)
    x = torch.randn(32, 16, device="cuda")
    out, ref = graphed(x), twin(x)
    torch.testing.assert_close(out, ref)
    out.sum().backward()
    ref.sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
print("graphed")
"""


@pytest.mark.deep
@requires_graphs()
def test_cuda_graphs_map_to_emu():
    done = _run(GRAPH_SCRIPT, "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["replayed"]


@pytest.mark.deep
@requires_graphs()
@requires_captured_backward()
def test_make_graphed_callables_maps_to_emu():
    done = _run(GRAPHED_CALLABLES_SCRIPT, "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["graphed"]


TORCHSCRIPT_SCRIPT = """
import torch
import torch_emu.contrib.transfer_to_emu
import torch.distributed.optim  # scripts its functional optimizers at import


@torch.jit.script
def shifted(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    fixed = torch.tensor([1.0, 2.0], device=torch.device("cpu")).to(device)
    return x.to(device) + torch.zeros(2, device=device) + fixed


print(shifted(torch.ones(2), torch.device("cpu")).tolist(), shifted(torch.ones(2), torch.device("cuda")).device)
"""


@pytest.mark.deep
def test_torchscript_compiles_code_calling_the_mapped_functions(tmp_path):
    # TorchScript knows torch.zeros, torch.tensor and torch.device by identity: the stand-ins must keep their ops.
    script = tmp_path / "scripted.py"  # TorchScript reads the source
    script.write_text(TORCHSCRIPT_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-W", "ignore:torch_emu.contrib.transfer_to_emu", str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[2.0,", "3.0]", "emu:0"]


PICKLE_SCRIPT = """
import pickle
import sys

import torch

try:  # torch before 2.4 pickles no Generator at all (TypeError); after the swap it must still do what torch does
    pickle.dumps(torch.Generator("cpu"))
    generators_pickle = True
except TypeError:
    generators_pickle = False
import torch_emu.contrib.transfer_to_emu

# Devices, the device class and generators pickle after the swap (DDP, torch.save and multiprocessing pickle them)
generator = torch.Generator("cpu")
generator.manual_seed(7)
objects = [torch.device("cpu"), torch.device("cuda:1"), torch.device, torch.Generator, {"at": torch.device("emu", 0)}]
back = pickle.loads(pickle.dumps(objects))
assert back == objects, back
if generators_pickle:
    assert pickle.loads(pickle.dumps(generator)).initial_seed() == 7
else:
    try:
        pickle.dumps(generator)
    except TypeError:
        pass
    else:
        raise AssertionError("a Generator pickles after the swap where torch itself cannot pickle one")
with open(sys.argv[1], "wb") as out:
    pickle.dump(objects[:3], out)
print("pickled")
"""

UNPICKLE_SCRIPT = """
import pickle
import sys

import torch
import torch_emu

# A process without transfer_to_emu loads them through torch's own classes
loaded = pickle.load(open(sys.argv[1], "rb"))
assert loaded == [torch.device("cpu"), torch.device("emu", 1), torch.device], loaded
assert loaded[2] is torch.device
print("loaded")
"""


@pytest.mark.deep
def test_devices_and_generators_pickle_after_the_swap(tmp_path):
    data = str(tmp_path / "devices.pickle")
    done = subprocess.run(
        [sys.executable, "-W", "ignore:torch_emu.contrib.transfer_to_emu", "-c", PICKLE_SCRIPT, data],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["pickled"]
    plain = subprocess.run(
        [sys.executable, "-c", UNPICKLE_SCRIPT, data], check=False, capture_output=True, text=True, timeout=120
    )
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.split() == ["loaded"]


PROFILER_SCRIPT = """
import torch
import torch_emu
import torch_emu.contrib.transfer_to_emu
from torch.profiler import ProfilerActivity

# The profilers' CUDA activity profiles emu
x = torch.randn(64, 64, device="cuda")
with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
    (x @ x).sum().item()
kernels = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
traced, _ = torch_emu.device_traces()
assert ("torch_emu::native::mm" in kernels) == traced, (kernels, traced)
with torch.autograd.profiler.profile(use_device="cuda") as legacy:
    (x @ x).sum().item()
assert any(e.name == "aten::mm" for e in legacy.function_events)
print("profiled")
"""


def _profilers_take_emu() -> bool:
    import inspect

    import torch

    legacy = inspect.signature(torch.autograd.profiler.profile.__init__).parameters
    return hasattr(torch.profiler.ProfilerActivity, "PrivateUse1") and "use_device" in legacy


@pytest.mark.deep
@pytest.mark.skipif(
    not _profilers_take_emu(), reason="not available: this torch's profilers take no PrivateUse1 device"
)
def test_profilers_cuda_activity_profiles_emu():
    done = _run(PROFILER_SCRIPT, "-W", "ignore:torch_emu.contrib.transfer_to_emu")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["profiled"]
