"""Imported by tests/unit/test_preload.py: an import that fails with something other than ImportError."""

raise RuntimeError("this module fails at import")
