"""Shared utilities with no knowledge of the pipeline: atomic writes, the subprocess choke point, hashing."""
