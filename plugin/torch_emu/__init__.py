"""torch_emu: the PyTorch backend of the emulated 'emu' accelerator (device string 'emu').

`import torch_emu` (or, on torch >= 2.5, just `import torch`) registers the device:
torch.device('emu:0'), Tensor.emu(), Tensor.is_emu and the torch.emu module.
"""

from torch_emu import _build_info
from torch_emu._guard import check as _check
from torch_emu._guard import importing_doctor as _importing_doctor

# Before the extension loads: a mismatched torch would otherwise fail inside the dynamic loader.
try:
    _check(vars(_build_info))
except ImportError as _exc:
    if not _importing_doctor():
        raise
    LOAD_ERROR = _exc  # torch_emu.doctor is being imported: it reports the error instead
else:
    LOAD_ERROR = None

if LOAD_ERROR is None:
    try:
        from torch_emu._load import *  # noqa: F403
        from torch_emu._load import __all__, __version__  # noqa: F401
    except Exception as _exc:  # a damaged driver library or extension: the doctor reports it, an import raises it
        if not _importing_doctor():
            raise
        LOAD_ERROR = _exc

if LOAD_ERROR is not None:

    def __getattr__(name):
        """Only the doctor gets this far with a failed load; anything else asked of the package raises its error."""
        raise ImportError(f"torch_emu did not load ({LOAD_ERROR}); torch_emu.{name} is not available") from LOAD_ERROR
