"""buildmatrix: build, smoke-test and publish an out-of-tree PyTorch backend across a torch x Python x driver matrix."""

__version__ = "0.1.0"
