"""The ``solbench`` command line (:mod:`solbench.cli.main` assembles the group)."""

from solbench.cli.main import main

__all__ = ["main"]
