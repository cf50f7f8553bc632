"""Shared (tied) parameters stay shared when a module moves to emu and back, changes dtype or loads a state dict,
and `tensor.data = other` works between emu and CPU tensors, as between CUDA and CPU tensors.

Module._apply (behind .to(), .cpu(), .half()) keeps a Parameter object, setting its .data, only where
torch._has_compatible_shallow_copy_type(old, new) is True; otherwise it makes a new Parameter per module, so a language
model whose output projection shares the input embedding gets two matrices and drifts from the CPU from its second step.
"""

from __future__ import annotations

import copy
import io

import pytest
import torch
from smoke_gates import requires_torch, requires_torch_save
from torch import nn

pytestmark = pytest.mark.feature("shared_parameters")

VOCAB, DIM, HEADS, SEQ = 48, 32, 4, 12


class _CausalSelfAttention(nn.Module):
    """GPT-2's eager attention: one fused qkv projection, a causal mask, softmax, an output projection."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).split(DIM, dim=2)
        q, k, v = (t.view(batch, seq, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) / (DIM // HEADS) ** 0.5
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.proj((weights @ v).transpose(1, 2).reshape(batch, seq, DIM))


class TiedLanguageModel(nn.Module):
    """A GPT-2 style decoder: the output projection is the input embedding (one Parameter, two modules)."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, DIM)
        self.wpe = nn.Embedding(SEQ, DIM)
        self.ln_1 = nn.LayerNorm(DIM)
        self.attn = _CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(DIM)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))
        self.ln_f = nn.LayerNorm(DIM)
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        h = self.wte(ids) + self.wpe(positions)
        h = h + self.attn(self.ln_1(h))
        h = h + self.mlp(self.ln_2(h))
        return self.lm_head(self.ln_f(h))


class TiedEncoderDecoder(nn.Module):
    """A T5 style encoder-decoder: encoder, decoder and output projection share one embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Embedding(VOCAB, DIM)
        self.encoder = nn.ModuleDict({"embed_tokens": nn.Embedding(VOCAB, DIM), "ff": nn.Linear(DIM, DIM)})
        self.decoder = nn.ModuleDict({"embed_tokens": nn.Embedding(VOCAB, DIM), "ff": nn.Linear(DIM, DIM)})
        self.encoder["embed_tokens"].weight = self.shared.weight
        self.decoder["embed_tokens"].weight = self.shared.weight
        self.lm_head = nn.Linear(DIM, VOCAB, bias=False)
        self.lm_head.weight = self.shared.weight

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        memory = torch.tanh(self.encoder["ff"](self.encoder["embed_tokens"](source))).mean(dim=1, keepdim=True)
        hidden = torch.tanh(self.decoder["ff"](self.decoder["embed_tokens"](target)) + memory)
        return self.lm_head(hidden * DIM**-0.5)


def _count(model: nn.Module) -> int:
    return len(list(model.parameters()))


def _assert_tied(model: nn.Module) -> None:
    if isinstance(model, TiedLanguageModel):
        assert model.lm_head.weight is model.wte.weight
    else:
        assert isinstance(model, TiedEncoderDecoder)
        shared = model.shared.weight
        assert model.encoder["embed_tokens"].weight is shared
        assert model.decoder["embed_tokens"].weight is shared
        assert model.lm_head.weight is shared


def _lm_loss(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    logits = model(ids[:, :-1])
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))


def _train(model: nn.Module, ids: torch.Tensor, steps: int) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = _lm_loss(model, ids)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


@pytest.fixture
def language_model() -> TiedLanguageModel:
    torch.manual_seed(0)
    return TiedLanguageModel()


def test_compatible_shallow_copy_type_as_for_cuda():
    cpu, emu = torch.ones(4), torch.ones(4, device="emu")
    # Dense tensors of two dense backends, or of one backend and two dtypes or devices: compatible.
    assert torch._has_compatible_shallow_copy_type(cpu, emu)
    assert torch._has_compatible_shallow_copy_type(emu, cpu)
    assert torch._has_compatible_shallow_copy_type(emu, emu.half())
    assert torch._has_compatible_shallow_copy_type(emu, torch.ones(4, device="emu:1"))
    # The refusals torch gives for CPU and CUDA stay: dense and sparse, dense and meta.
    sparse = torch.ones(4).to_sparse()
    assert not torch._has_compatible_shallow_copy_type(emu, sparse)
    assert not torch._has_compatible_shallow_copy_type(sparse, emu)
    meta = torch.ones(4, device="meta")
    assert torch._has_compatible_shallow_copy_type(meta, emu) == torch._has_compatible_shallow_copy_type(meta, cpu)
    assert torch._has_compatible_shallow_copy_type(emu, meta) == torch._has_compatible_shallow_copy_type(cpu, meta)


def test_tensor_shallow_copy():
    """PyTorch's reference backend's test_tensor_shallow_copy: set_data from emu to CPU and from CPU to emu."""
    self_t, from_t = torch.randn(4, 4), torch.randn(4, 4, device="emu")
    self_t.data = from_t
    assert self_t.device == from_t.device and self_t.data_ptr() == from_t.data_ptr()
    assert torch.equal(self_t.cpu(), from_t.cpu())

    self_t, from_t = torch.randn(4, 4, device="emu"), torch.randn(4, 4)
    self_t.data = from_t
    assert self_t.device.type == "cpu" and self_t.data_ptr() == from_t.data_ptr()
    assert torch.equal(self_t, from_t)


def test_parameter_data_across_devices_keeps_autograd():
    weight = nn.Parameter(torch.randn(3, 3))
    weight.data = weight.data.emu()
    assert isinstance(weight, nn.Parameter) and weight.is_leaf and weight.device.type == "emu"
    (weight * 2).sum().backward()
    assert weight.grad is not None and weight.grad.device == weight.device
    assert weight.grad.cpu().tolist() == [[2.0] * 3] * 3


@pytest.mark.parametrize("make", [TiedLanguageModel, TiedEncoderDecoder])
def test_to_emu_keeps_one_parameter(make):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = make()
    before = _count(model)
    moved = model.to("emu")
    assert moved is model and _count(model) == before
    _assert_tied(model)
    assert all(p.device.type == "emu" for p in model.parameters())


def test_cpu_dtype_and_half_keep_the_tie(language_model):  # type: ignore[no-untyped-def]
    model = language_model
    count = _count(model)
    for move in (
        lambda m: m.to("emu"),
        lambda m: m.to(torch.float64),
        lambda m: m.cpu(),
        lambda m: m.to("emu", torch.float32),
        lambda m: m.half(),
        lambda m: m.to("cpu", torch.float32),
        lambda m: m.emu(1),
    ):
        move(model)
        assert _count(model) == count
        _assert_tied(model)


def test_gradients_move_with_their_parameters(language_model):  # type: ignore[no-untyped-def]
    model = language_model
    ids = torch.randint(0, VOCAB, (2, SEQ))
    _lm_loss(model, ids).backward()
    grad = model.wte.weight.grad
    model.to("emu")
    assert model.wte.weight.grad is grad and grad.device.type == "emu"  # moved in place, as the parameter was


def test_adamw_steps_match_cpu(language_model):  # type: ignore[no-untyped-def]
    ids = torch.randint(0, VOCAB, (4, SEQ))
    cpu_model = copy.deepcopy(language_model)
    emu_model = copy.deepcopy(language_model).to("emu")
    _assert_tied(emu_model)
    cpu_losses = _train(cpu_model, ids, steps=5)
    emu_losses = _train(emu_model, ids.emu(), steps=5)
    assert emu_losses == pytest.approx(cpu_losses, rel=1e-4, abs=1e-5)
    _assert_tied(emu_model)
    # The trained models agree where it shows: the shared matrix and the logits. (Not every parameter: the key bias
    # gets a gradient that is rounding noise, softmax being blind to it, and Adam scales noise to full steps.)
    torch.testing.assert_close(emu_model.wte.weight.detach().cpu(), cpu_model.wte.weight.detach(), rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        torch.testing.assert_close(emu_model(ids.emu()).cpu(), cpu_model(ids), rtol=1e-4, atol=1e-4)


def test_encoder_decoder_adamw_steps_match_cpu():
    torch.manual_seed(0)
    model = TiedEncoderDecoder()
    source, target = torch.randint(0, VOCAB, (3, SEQ)), torch.randint(0, VOCAB, (3, SEQ))
    runs = []
    for device in ("cpu", "emu"):
        local = copy.deepcopy(model).to(device)
        optimizer = torch.optim.AdamW(local.parameters(), lr=1e-2)
        losses = []
        for _ in range(4):
            optimizer.zero_grad()
            logits = local(source.to(device), target.to(device))
            loss = nn.functional.cross_entropy(logits.reshape(-1, VOCAB), target.to(device).reshape(-1))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        runs.append(losses)
    assert runs[1] == pytest.approx(runs[0], rel=1e-4, abs=1e-5)


@requires_torch_save()
def test_load_state_dict_keeps_the_tie(language_model):  # type: ignore[no-untyped-def]
    torch.manual_seed(1)
    trained = TiedLanguageModel()
    buffer = io.BytesIO()
    torch.save(trained.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="emu", weights_only=True)
    model = language_model.to("emu")
    count = _count(model)
    model.load_state_dict(state)
    assert _count(model) == count
    _assert_tied(model)
    assert torch.equal(model.lm_head.weight.cpu(), trained.wte.weight.detach())
    model.load_state_dict(trained.state_dict())  # from CPU tensors into the emu model
    _assert_tied(model)
    assert model.wte.weight.device.type == "emu"


@requires_torch(">=2.5", "sparse emu tensors")
def test_sparse_gradients_still_move_as_new_tensors():
    """The check's other users keep working: a sparse gradient moves to emu (torch's SparseTensorImpl accepts no
    shallow copy across its own backend list, so Module._apply gives the parameter a new gradient tensor)."""
    embedding = nn.Embedding(10, 4, sparse=True)
    embedding(torch.tensor([1, 3, 3])).sum().backward()
    assert embedding.weight.grad is not None and embedding.weight.grad.is_sparse
    weight = embedding.weight
    embedding.to("emu")
    assert embedding.weight is weight and weight.device.type == "emu"
    grad = embedding.weight.grad
    assert grad is not None and grad.is_sparse and grad.device.type == "emu"
    assert grad.to_dense().cpu()[3].tolist() == [2.0] * 4
