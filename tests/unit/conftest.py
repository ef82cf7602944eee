"""Fixtures shared by the CPU tests."""

import signal

import pytest


@pytest.fixture
def sigint_raises_keyboard_interrupt():
    """Install Python's own SIGINT handler for the test, and restore the old one after it.

    A CI runner or a background shell may start the test process with SIGINT ignored; then
    ``_thread.interrupt_main()`` (a simulated Ctrl-C) does nothing. A test that relies on Ctrl-C
    raising KeyboardInterrupt sets the handler it relies on.
    """
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.fixture(autouse=True)
def _no_terminal_size_from_the_runner(monkeypatch):
    """Render as a piped command does (solbench's 160-column default), whatever the runner sets:
    pytest-xdist's workers inherit ``COLUMNS=80``, which would truncate the tables tests read."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
