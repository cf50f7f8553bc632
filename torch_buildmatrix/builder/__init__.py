"""The build stage: the engine runs each cell through a runner, checks and smoke-tests its wheel, records the result."""
