"""solbench."""
