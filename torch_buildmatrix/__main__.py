"""Entry point for `python -m torch_buildmatrix`."""

from torch_buildmatrix.cli import main

raise SystemExit(main())
