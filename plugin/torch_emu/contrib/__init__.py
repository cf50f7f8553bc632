"""Optional helpers that change global behaviour when imported (see transfer_to_emu)."""


class TransferToEmuWarning(UserWarning):
    """What `import torch_emu.contrib.transfer_to_emu` did, said once. A suite that runs with warnings as errors
    silences it with pytest's `filterwarnings = ["ignore::torch_emu.contrib.TransferToEmuWarning"]`, or with
    Python's `-W "ignore:torch_emu.contrib.transfer_to_emu"` (the message's start). Importing this package does
    not apply the transfer."""
