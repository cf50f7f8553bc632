"""Entry point for `python -m buildmatrix`."""

from buildmatrix.cli import main

raise SystemExit(main())
