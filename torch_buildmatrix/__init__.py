"""torch-buildmatrix: build, smoke-test and publish PyTorch C++ extensions and device backends across torch x Python x
SDK."""

__version__ = "0.2.0"  # the package's only version: pyproject.toml reads it from here
