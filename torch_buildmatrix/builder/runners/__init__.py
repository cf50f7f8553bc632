"""Runners build and smoke-test one cell each behind one interface (base.Runner); select.py chooses one."""
