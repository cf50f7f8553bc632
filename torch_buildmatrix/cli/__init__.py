"""The command line, the only layer that talks to the terminal: the parser and main (app.py), the shared flags
(flags.py), one module per group of commands (cells.py, releases.py, publishing.py, project.py), and what they print
(render.py). Each command parses its flags into typed options, calls one library function and renders its result."""

from torch_buildmatrix.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
