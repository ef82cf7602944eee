"""An implementation that makes a tqdm bar, as torch.fx's Interpreter does under torch.compile, and
fails if that made tqdm's multiprocessing lock: in a worker started by the fork server, a named
semaphore that a killed worker leaves behind (tests/unit/test_preload.py)."""

import torch
import tqdm
import tqdm.std


def double(x: torch.Tensor) -> torch.Tensor:
    tqdm.tqdm(total=1, disable=True).close()
    made = getattr(tqdm.std.TqdmDefaultWriteLock, "mp_lock", None)
    if made is not None:
        raise RuntimeError(f"tqdm made a multiprocessing lock in the worker: {made!r}")
    return 2 * x
