"""Entry point of the `torch.backends` group: on torch >= 2.5, `import torch` brings emu up.

A separate top-level module so that a torch_emu that cannot load (wrong torch, missing
driver) warns with its reason instead of making `import torch` itself fail.
"""

import warnings


def load() -> None:
    try:
        import torch_emu  # noqa: F401
    except ImportError as exc:
        warnings.warn(f"the emu backend was not loaded: {exc}", RuntimeWarning, stacklevel=2)
