"""Real models on emu: model code nobody here wrote (transformers' own classes), randomly initialised from small
configs, nothing downloaded. Each trains on emu as on the CPU, generates the same tokens, takes a bf16 autocast step,
and a compiled training step matches eager where emu's Inductor route is on.

Features: "models" (optimizer steps match the CPU, one test per architecture), "models_generate",
"models_autocast" and "models_compile". The smoke environment installs transformers at a version that supports the
cell's torch (matrix.yaml's smoke requirements); a release or Python it cannot serve records the reason.
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict

import pytest
import torch
from smoke_gates import (
    dynamo_unavailable,
    inductor_device_registry_unavailable,
    requires_torch,
    transformers_unavailable,
)

# Models come from configs, never from a hub: make any attempt to reach one fail instead of downloading.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

VOCAB = 64
STEPS = 3
LEARNING_RATE = 1e-2

Batch = Dict[str, torch.Tensor]


@dataclass(frozen=True)
class Architecture:
    """One model class of transformers, with a config small enough for the smoke suite and a batch maker."""

    name: str
    kind: str
    model_class: str
    config_class: str
    config: dict[str, Any]
    batch: Callable[[torch.Generator], Batch]

    def build(self) -> torch.nn.Module:
        """The model on the CPU, in training mode, with the same random init every time."""
        import transformers

        for name in (self.model_class, self.config_class):
            if not hasattr(transformers, name):
                pytest.skip(f"not available: transformers {transformers.__version__} has no {name}")
        config = getattr(transformers, self.config_class)(**self.config)
        torch.manual_seed(0)
        model = getattr(transformers, self.model_class)(config)
        return model.train()


def tokens(generator: torch.Generator, *shape: int) -> torch.Tensor:
    return torch.randint(0, VOCAB, shape, generator=generator)


def causal_lm_batch(generator: torch.Generator) -> Batch:
    ids = tokens(generator, 2, 8)
    return {"input_ids": ids, "labels": ids}


def masked_lm_batch(generator: torch.Generator) -> Batch:
    return {"input_ids": tokens(generator, 2, 8), "labels": tokens(generator, 2, 8)}


def seq2seq_batch(generator: torch.Generator) -> Batch:
    return {"input_ids": tokens(generator, 2, 8), "labels": tokens(generator, 2, 6)}


def image_batch(generator: torch.Generator) -> Batch:
    return {
        "pixel_values": torch.randn(2, 3, 32, 32, generator=generator),
        "labels": torch.randint(0, 5, (2,), generator=generator),
    }


# Dropout off, so both devices compute the same function; special tokens inside the small vocabulary.
ARCHITECTURES = [
    Architecture(
        "resnet",
        "convolutional",
        "ResNetForImageClassification",
        "ResNetConfig",
        {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1], "num_labels": 5},
        image_batch,
    ),
    Architecture(
        "rwkv",
        "recurrent",
        "RwkvForCausalLM",
        "RwkvConfig",
        {
            "vocab_size": VOCAB,
            "context_length": 16,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "attention_hidden_size": 32,
            "intermediate_size": 64,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
        causal_lm_batch,
    ),
    Architecture(
        "bert",
        "encoder attention",
        "BertForMaskedLM",
        "BertConfig",
        {
            "vocab_size": VOCAB,
            "hidden_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "intermediate_size": 64,
            "max_position_embeddings": 32,
            "hidden_dropout_prob": 0.0,
            "attention_probs_dropout_prob": 0.0,
        },
        masked_lm_batch,
    ),
    Architecture(
        "gpt2",
        "decoder attention, tied embeddings",
        "GPT2LMHeadModel",
        "GPT2Config",
        {
            "vocab_size": VOCAB,
            "n_positions": 32,
            "n_embd": 32,
            "n_layer": 2,
            "n_head": 2,
            "resid_pdrop": 0.0,
            "embd_pdrop": 0.0,
            "attn_pdrop": 0.0,
            "bos_token_id": 0,
            "eos_token_id": 0,
        },
        causal_lm_batch,
    ),
    Architecture(
        "t5",
        "encoder-decoder",
        "T5ForConditionalGeneration",
        "T5Config",
        {
            "vocab_size": VOCAB,
            "d_model": 32,
            "d_kv": 16,
            "d_ff": 64,
            "num_layers": 2,
            "num_decoder_layers": 2,
            "num_heads": 2,
            "dropout_rate": 0.0,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "decoder_start_token_id": 0,
        },
        seq2seq_batch,
    ),
]
BY_NAME = {a.name: a for a in ARCHITECTURES}
GENERATORS = ["gpt2", "t5", "rwkv"]


def require_transformers() -> str:
    """transformers' version, or skip with why it cannot run beside this torch."""
    reason = transformers_unavailable()
    if reason is not None:
        pytest.skip(reason)
    import transformers

    return str(transformers.__version__)


def on_emu(model: torch.nn.Module) -> torch.nn.Module:
    """The model moved as a user moves it."""
    return model.to("emu")  # no re-tying: shared parameters stay shared (test_shared_parameters.py)


def to_device(batch: Batch, device: str) -> Batch:
    return {k: v.to(device) for k, v in batch.items()}


def parameter_count(model: torch.nn.Module) -> int:
    return len(list(model.parameters()))


_trained: list[str] = []
# The one small model step every cell runs (smoke.tiers' quick suite); the other models are the deep tier's: they
# depend on the wheel and torch alone, and run once per build.
QUICK_MODEL = "resnet"


@pytest.mark.feature("models")
@pytest.mark.parametrize(
    "arch",
    [pytest.param(a, id=a.name, marks=() if a.name == QUICK_MODEL else pytest.mark.deep) for a in ARCHITECTURES],
)
def test_optimizer_steps_match_the_cpu(arch: Architecture, emu_feature_detail):
    version = require_transformers()
    reference = arch.build()
    model = on_emu(copy.deepcopy(reference))
    assert parameter_count(model) == parameter_count(reference), "shared parameters came apart on emu"
    optimizers = [torch.optim.AdamW(m.parameters(), lr=LEARNING_RATE) for m in (reference, model)]
    generator = torch.Generator().manual_seed(1)
    for step in range(STEPS):
        batch = arch.batch(generator)
        losses = []
        for m, optimizer, device in zip((reference, model), optimizers, ("cpu", "emu")):
            loss = m(**to_device(batch, device)).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss.detach().cpu())
        torch.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=1e-5, msg=f"loss at step {step}")
    # AdamW turns a gradient that is rounding noise (a key bias's, exactly 0 in theory) into a step of up to the
    # learning rate, so parameters are compared to a tenth of it; a real difference shows in the losses first.
    for (name, theirs), mine in zip(reference.named_parameters(), model.parameters()):
        torch.testing.assert_close(mine.detach().cpu(), theirs.detach(), rtol=1e-3, atol=LEARNING_RATE / 10, msg=name)
    _trained.append(f"{arch.model_class} ({arch.kind})")
    emu_feature_detail(f"{STEPS} AdamW steps match the CPU, transformers {version}: " + ", ".join(_trained))


@pytest.mark.deep
@pytest.mark.feature("models_generate")
@pytest.mark.parametrize("name", GENERATORS)
def test_greedy_generation_matches_the_cpu(name: str, emu_feature_detail):
    version = require_transformers()
    arch = BY_NAME[name]
    reference = arch.build().eval()
    model = on_emu(copy.deepcopy(reference))
    prompt = tokens(torch.Generator().manual_seed(2), 2, 5)
    options = {"max_new_tokens": 6, "min_new_tokens": 6, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        expected = reference.generate(prompt, **options)  # type: ignore[operator]
        produced = model.generate(prompt.to("emu"), **options)  # type: ignore[operator]
    assert produced.device.type == "emu"
    assert produced.cpu().tolist() == expected.tolist()
    emu_feature_detail(f"greedy decoding gives the CPU's tokens (transformers {version}: GPT-2, T5, RWKV)")


def autocast_unavailable() -> str | None:
    is_available = getattr(torch.amp, "is_autocast_available", None)  # torch >= 2.4
    if is_available is not None and not is_available("emu"):
        return "not available: this torch has no autocast for PrivateUse1 devices"
    return None


@pytest.mark.deep
@pytest.mark.feature("models_autocast")
@requires_torch(">=2.4", "autocast on emu (CUDA's policy lists)")
@pytest.mark.parametrize("name", ["gpt2", "resnet"])
def test_bf16_autocast_training_step(name: str, emu_feature_detail):
    version = require_transformers()
    reason = autocast_unavailable()
    if reason is not None:
        pytest.skip(reason)
    arch = BY_NAME[name]
    reference = arch.build()
    model = on_emu(copy.deepcopy(reference))
    batch = arch.batch(torch.Generator().manual_seed(3))
    expected = reference(**batch).loss
    optimizer = torch.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    before = [p.detach().cpu().clone() for p in model.parameters()]
    with torch.autocast(device_type="emu", dtype=torch.bfloat16):
        out = model(**to_device(batch, "emu"))
    assert out.logits.dtype == torch.bfloat16  # the matmuls and convolutions ran in bf16
    out.loss.backward()
    optimizer.step()
    # bf16 keeps 8 bits of mantissa: the loss is the float32 loss to about 1%.
    torch.testing.assert_close(out.loss.detach().float().cpu(), expected.detach(), rtol=3e-2, atol=3e-2)
    after = [p.detach().cpu() for p in model.parameters()]
    assert all(p.dtype == torch.float32 and torch.isfinite(p).all() for p in after)
    assert any(not torch.equal(a, b) for a, b in zip(after, before)), "the optimizer step changed nothing"
    emu_feature_detail(f"a bf16 autocast step trains GPT-2 and ResNet (transformers {version})")


@pytest.mark.deep
@pytest.mark.feature("models_compile")
@pytest.mark.parametrize("name", ["gpt2"])
def test_compiled_training_step_matches_eager(name: str, emu_feature_detail):
    for reason in (dynamo_unavailable(), inductor_device_registry_unavailable()):
        if reason is not None:
            pytest.skip(reason)
    from torch_emu import _inductor_backend

    if not _inductor_backend.route_enabled():
        pytest.skip(
            f"not available: Inductor generates no code for emu on torch {torch.__version__} "
            f"(verified on {_inductor_backend.verified_releases_text()})"
        )
    version = require_transformers()
    import torch._dynamo as dynamo

    arch = BY_NAME[name]
    reference = arch.build()
    model = on_emu(copy.deepcopy(reference))
    batch = arch.batch(torch.Generator().manual_seed(4))

    def step(m: torch.nn.Module, batch: Batch) -> torch.Tensor:
        loss = m(**batch).loss
        loss.backward()
        return loss

    dynamo.reset()
    loss = torch.compile(step)(model, to_device(batch, "emu"))
    expected = step(reference, batch)
    torch.testing.assert_close(loss.detach().cpu(), expected.detach())
    for (param, theirs), mine in zip(reference.named_parameters(), model.parameters()):
        torch.testing.assert_close(mine.grad.cpu(), theirs.grad, rtol=1e-4, atol=1e-5, msg=param)
    emu_feature_detail(
        f"Inductor compiles a GPT-2 training step (position ids from arange, layer norms, tied embeddings, "
        f"cross-entropy) that matches eager, transformers {version}"
    )
