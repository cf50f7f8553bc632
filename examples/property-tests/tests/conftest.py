"""The suite's hypothesis settings: a fixed, small number of examples and no deadline (cells share busy machines)."""

from hypothesis import settings

settings.register_profile("cells", max_examples=60, deadline=None, derandomize=True)
settings.load_profile("cells")
