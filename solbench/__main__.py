"""``python -m solbench``."""

from solbench.cli import main

main()
