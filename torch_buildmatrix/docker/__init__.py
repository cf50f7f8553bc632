"""Everything that speaks to a Docker engine: the engine helper, the builder images, the one module that runs docker."""
