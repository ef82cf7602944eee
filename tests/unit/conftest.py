"""Fixtures shared by the CPU tests."""

import os
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
    pytest-xdist's workers inherit ``COLUMNS=80``, which would truncate the tables tests read. And
    readline, which pytest imports, sets ``COLUMNS`` and ``LINES`` in the C environment behind
    ``os.environ``'s back: a command a test starts inherited them, and wrapped its tables at 80
    columns (a cell such as "2 ok, 2 crashed, 1 timeout" split wherever the other columns were wide)."""
    for name in ("COLUMNS", "LINES"):
        monkeypatch.delenv(name, raising=False)
        os.unsetenv(name)


_ROOT = __import__("pathlib").Path(__file__).resolve().parents[2]


def _results_in_tree() -> set[str]:
    """Result files under the checkout's results/ that git does not track (results/h200 is)."""
    folder = _ROOT / "results"
    return {str(p.relative_to(folder)) for p in folder.rglob("*.json")
            if p.is_file() and p.relative_to(folder).parts[0] != "h200"} if folder.is_dir() else set()


@pytest.fixture(autouse=True)
def _tests_never_write_into_the_working_tree():
    """A test that saves a run must save it under tmp_path (``-o``, ``--results-dir``): a run left in
    ./results/ is what ``solbench show`` would then call the latest run."""
    before = _results_in_tree()
    yield
    new = _results_in_tree() - before
    assert not new, f"the test wrote into the working tree: results/{sorted(new)[0]}"
