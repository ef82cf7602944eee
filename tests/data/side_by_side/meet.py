"""Implementations for meet.yaml: a's and b's set-ups each mark themselves started in this file's
folder, and wait up to a minute for the other's mark. Side by side both pass at once; one after
the other the first fails. Tests copy both files to a fresh folder first."""

import os
import pathlib
import time

import torch

WAIT_S = 60.0


def _meet(me: str, other: str, what: str = "set up") -> None:
    folder = pathlib.Path(__file__).parent
    (folder / me).touch()
    deadline = time.monotonic() + WAIT_S
    while not (folder / other).exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{other} did not {what} while {me} did")
        time.sleep(0.01)


def a_setup(x: torch.Tensor) -> dict:
    _meet("a", "b")
    return {"x": x}


def b_setup(x: torch.Tensor) -> dict:
    _meet("b", "a")
    return {"x": x}


def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def double_wrong(x: torch.Tensor) -> torch.Tensor:
    return x * 2.5


def dies_when_checked(x: torch.Tensor) -> torch.Tensor:
    os._exit(3)


def slow_setup(x: torch.Tensor) -> dict:
    time.sleep(0.3)
    (pathlib.Path(__file__).parent / "slow.ready").touch()
    return {"x": x}


def alone_setup(x: torch.Tensor) -> dict:
    """Asks for the device to itself, as a cuBLASLt plan does before it tunes: by then every other
    worker of the case has set up and checked (it is waiting at its turn)."""
    from solbench.impls import cublaslt

    cublaslt.wait_alone()
    if not (pathlib.Path(__file__).parent / "slow.ready").exists():
        raise RuntimeError("set up while slow was still setting up")
    return {"x": x}


CALLS = {"n": 0}  # calls of counted() in this worker process
CHECKED_CALLS = 3  # the correctness checks before timing call it three times (input sets 0, 1, then 0)


def counted(x: torch.Tensor) -> torch.Tensor:
    CALLS["n"] += 1
    return x * 2


def _meet_late(me: str, other: str, x: torch.Tensor) -> dict:
    """After timing (counted() was timed), wait for the other's mark: the set-ups the checks after
    timing run (fresh inputs) then meet only if both workers run those checks at once."""
    if CALLS["n"] > CHECKED_CALLS:
        _meet(me, other, "run its checks after timing")
    return {"x": x}


def late_a_setup(x: torch.Tensor) -> dict:
    return _meet_late("late_a", "late_b", x)


def late_b_setup(x: torch.Tensor) -> dict:
    return _meet_late("late_b", "late_a", x)


def crowded_setup(x: torch.Tensor) -> dict:
    """Runs out of memory the first time (beside the case's other workers, in the test), then sets up:
    a task that ran out of memory beside others is run again alone."""
    mark = pathlib.Path(__file__).parent / "crowded.tried"
    if not mark.exists():
        mark.touch()
        raise MemoryError("out of memory beside the other workers")
    return {"x": x}


def faulted_setup(x: torch.Tensor) -> dict:
    """Raises a CUDA error the first time (beside the case's other workers, in the test), as a device
    library does when its memory fails it; then sets up: such a task is run again alone."""
    mark = pathlib.Path(__file__).parent / "faulted.tried"
    if not mark.exists():
        mark.touch()
        raise RuntimeError("CUDA error: unknown error")
    return {"x": x}
