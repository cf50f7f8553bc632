"""The model: matrix.yaml parsed into typed objects, the registry's view of torch releases, the expansion into cells."""
