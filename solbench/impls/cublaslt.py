"""``D = x @ w.T + C`` as one cuBLASLt call with C and D distinct, through nvmath-python.

``torch.addmm(c, x, w.t())`` first copies C into the output, then runs a beta = 1 GEMM (two
kernels); cuBLASLt reads C and writes a separate D in the GEMM's epilogue. nvmath-python's
stateful ``Matmul`` is planned once (heuristic algorithm choice, descriptors, workspace):
that host work, tens of microseconds, belongs in an implementation's ``setup``. Each call
then runs one kernel into a freshly allocated D, on torch's current stream.

nvmath-python is optional (``pip install 'solbench[nvmath]'``); without it the plan raises
DeviceError, which solbench reports as ``skipped``.

Autotuning (:func:`plan_tuned`) is paid once per machine and problem: the first plan to meet a
problem times the algorithms (:func:`fastest`) and writes down the fastest; later plans, in any
worker of this run or a later one, take it. A worker that sets up side by side with others first
waits until it has the device to itself (:func:`tuning`): tuning times kernels.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import statistics
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from solbench.errors import DeviceError
from solbench.kernels.requirements import NO_NVMATH

__all__ = ["CHOICES_ENV", "AddmmPlan", "Fp8AddmmPlan", "MatmulPlan", "available", "fastest", "medians", "plan_tuned",
           "plans_since", "tuning", "wait_alone"]

CHOICES_ENV = "SOLBENCH_CUBLASLT_CHOICES"  # where autotuned choices are kept (set by the worker); unset: the machine's
_PLANS: list[tuple[str, str]] = []  # each plan_tuned choice in this process: ("tuned" or "reused", its label)
_TUNING: list[tuple[Callable[[], Any], Callable[[], None]]] = []  # (timer, wait) of tuning(), innermost last


@contextlib.contextmanager
def tuning(timer: Callable[[], Any], wait: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Within the block, a plan whose problem has no kept choice tunes (:func:`plan_tuned`): it calls
    ``wait()``, which returns once nothing else runs on the device, then times the candidates with
    ``timer()``, the harness's timer (``prepare``, ``sample``, ``release``: a
    :class:`solbench.device.timer.CudaColdTimer`). A measuring worker opens it around each task
    (:mod:`solbench.measure.worker`); outside it nothing is tuned.

    A worker set up side by side with others (``Task.wait_turn``) waits for its turn: the tuning, and
    the rest of its set-up and checks, then run alone, the other workers idle at their turns. Tuned
    beside their set-up and checks, the ranking would time their kernels as much as its own."""
    _TUNING.append((timer, wait))
    try:
        yield
    finally:
        _TUNING.pop()


def wait_alone() -> None:
    """Return once nothing else runs on the device (:func:`tuning`'s ``wait``); at once outside it."""
    if _TUNING:
        _TUNING[-1][1]()


def machine_choices() -> Path:
    """Where this machine keeps its cuBLASLt choices when no folder is given: ``solbench`` in the
    user's cache folder (``$XDG_CACHE_HOME``, else ``~/.cache``). Remove it to tune again."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "solbench")


def plans_since(start: int) -> tuple[int, dict[str, Any]]:
    """(the choices this process has made so far, what the choices from number ``start`` on record):
    ``cublaslt_tuned`` (timed here) and ``cublaslt_reused`` (taken from the kept choices) where
    non-zero, and ``cublaslt_algorithms``, the distinct algorithms chosen (``id:config hash``,
    comma-separated), so that runs that chose differently can be told apart. The worker records
    what each task added."""
    made = _PLANS[start:]
    record: dict[str, Any] = {f"cublaslt_{how}": n for how in ("tuned", "reused")
                              if (n := sum(1 for h, _ in made if h == how))}
    if made:
        record["cublaslt_algorithms"] = ",".join(sorted({label for _, label in made}))
    return len(_PLANS), record


def plan_tuned(mm: Any, stream: Any, *, iterations: int = 40, before: Callable[[], object] | None = None,
               **plan: Any) -> str:
    """``mm.plan(**plan)``, then the fastest of the algorithms it offers: timed here (:func:`fastest`),
    or the one an earlier plan timed fastest for the same problem; returns ``"tuned"``,
    ``"reused"``, ``"single"`` where the heuristic offers one algorithm (nothing to choose), or
    ``"heuristic"`` outside :func:`tuning` with no kept choice (its first algorithm, not kept). Either
    way ``mm`` is then planned with that one algorithm.

    The problem is what cuBLASLt's heuristic offers for it on this device: every algorithm in its
    answer, configuration bytes and order (they follow from the shapes, types, layouts, epilogue,
    pointer alignment and the library version). The worker that tunes writes the fastest one's bytes
    to the choices folder (``SOLBENCH_CUBLASLT_CHOICES``: a run's ``--compile-cache DIR``, else the
    machine's, :func:`machine_choices`), keyed by the device's name and that answer; a later plan
    whose heuristic gives the same answer, in this run or a later one, uses that algorithm and times
    none. So every run on a machine executes the algorithm the first one measured fastest: on an
    H200 two runs that each tuned for themselves put an FP8 GEMM 13% apart (BENCHMARKS.md, sixth
    session), a difference of choice, not of code. The result records which happened
    (:func:`plans_since`). ``before``: what the implementation's call runs ahead of the GEMM (FP8:
    quantizing x), timed with each candidate, so that the ranking is of the call the harness times;
    called once before a tuning worker waits for its turn, so that its first call (a JIT compile) runs
    side by side with the other workers, not while they wait.
    """
    offered = mm.plan(stream=stream, **plan)
    if len(offered) < 2:
        return "single"
    folder = os.environ.get(CHOICES_ENV) or str(machine_choices())
    configs = [bytes(a.as_numpy().tobytes()) for a in offered]
    name = torch.cuda.get_device_name(torch.cuda.current_device()).encode()
    path = Path(folder, "cublaslt", hashlib.sha256(name + b"|" + b"|".join(configs)).hexdigest() + ".json")
    chosen = _read_choice(path)
    if chosen in configs:
        how, best = "reused", configs.index(chosen)
    elif not _TUNING:  # no harness timer here (a library call outside a measuring worker): time nothing
        how, best = "heuristic", 0
    else:
        timer, _ = _TUNING[-1]
        if before is not None:  # its first call (a Triton JIT compile) side by side, not in the turn others wait on
            before()
        wait_alone()
        how, best = "tuned", fastest(mm, offered, timer(), iterations, before=before)
        _write_choice(path, configs[best])
    mm.plan(stream=stream, algorithms=[offered[best]], **plan)
    _PLANS.append((how, _label(offered[best], configs[best])))
    return how


def _label(algorithm: Any, config: bytes) -> str:
    return f"{getattr(algorithm, 'algorithm_id', '?')}:{hashlib.sha256(config).hexdigest()[:8]}"


def fastest(mm: Any, offered: Sequence[Any], timer: Any, iterations: int = 40, *,
            before: Callable[[], object] | None = None) -> int:
    """The index of the fastest of ``offered`` (algorithms of the planned ``mm``), each call timed by
    ``timer``, the harness's default timer (:class:`solbench.device.timer.CudaColdTimer`: the stream
    held by the gate while the host enqueues, a sample taken again if the hold ran dry, L2 flushed
    clean, CUDA events around the call), with ``before()`` and the GEMM inside the window. Each
    algorithm runs ``iterations`` times, in a fresh random order every pass, after ``WARM_PASSES``
    untimed passes that bring the clocks up from idle.

    The choice must be the same in every run, or two runs of one tree differ by the choice. So the
    earliest algorithm in the heuristic's order whose median is within ``TIE`` of the fastest wins,
    and once made the choice is kept (:func:`plan_tuned`). On an H200, o_proj `fp8`'s candidates read
    12.5-17.5 µs at 16 tokens alone and 13.7-18.1 µs beside another process's GEMMs, where the
    fastest at 64 tokens changed (``bench/fp8_tuner_probe.py``): hence :func:`tuning`'s wait.

    nvmath's own ``autotune`` flushes by copying an L2-sized host buffer to the device before each
    call (5 ms a call on an H200) and times without a hold, so at decode sizes its windows hold host
    launch time of the same order as the kernels it ranks."""
    return first_within(medians(mm, offered, timer, iterations, before=before))


def medians(mm: Any, offered: Sequence[Any], timer: Any, iterations: int = 40, *,
            before: Callable[[], object] | None = None) -> list[float]:
    """Each of ``offered``'s median seconds a call, measured as :func:`fastest` describes."""
    stream = torch.cuda.current_stream(torch.cuda.current_device())
    timer.prepare([functools.partial(_candidate, mm, a, stream, before) for a in offered])
    order = list(range(len(offered)))
    seconds: list[list[float]] = [[] for _ in offered]
    try:
        for _ in range(WARM_PASSES):  # untimed: the clocks up from idle before anything is ranked
            for i in order:
                timer.sample(i)
        for _ in range(iterations):
            random.shuffle(order)
            for i in order:
                seconds[i].append(timer.sample(i))
    finally:
        timer.release()
    return [statistics.median(s) for s in seconds]


def _candidate(mm: Any, algorithm: Any, stream: Any, before: Callable[[], object] | None) -> Any:
    if before is not None:
        before()
    return mm.execute(algorithm=algorithm, stream=stream)


TIE = 0.02  # algorithms whose tuning medians are this close to the fastest count as tied
WARM_PASSES = 10  # untimed passes over every algorithm before the timed ones


def first_within(medians: Sequence[float], tie: float = TIE) -> int:
    """The first index whose value is within ``tie`` (a fraction) of the smallest."""
    best = min(medians)
    return next(i for i, m in enumerate(medians) if m <= best * (1 + tie))


def _read_choice(path: Path) -> bytes | None:
    try:
        return bytes.fromhex(json.loads(path.read_text())["algorithm"])
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or unreadable: tune


def _write_choice(path: Path, config: bytes) -> None:
    """Atomically (workers may tune the same problem side by side: the last one wins, whole). A
    folder that cannot be written (read-only home) only means the next plan tunes again."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"algorithm": config.hex()}, f)
        os.replace(tmp, path)
    except OSError:
        return


def available() -> bool:
    """Whether nvmath-python imports here."""
    try:
        _matmul_class()
    except DeviceError:
        return False
    return True


def _matmul_class() -> Any:
    try:
        from nvmath.linalg.advanced import Matmul
    except ImportError as exc:
        raise DeviceError(f"{NO_NVMATH}: {exc}") from None
    return Matmul


class AddmmPlan:
    """A planned ``x @ w.T + c`` (beta = 1) for these very tensors; call it to run it."""

    def __init__(self, x: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> None:
        if not (x.is_cuda and w.is_cuda and c.is_cuda):
            raise DeviceError("needs CUDA tensors (cuBLASLt)")
        matmul = _matmul_class()
        stream = torch.cuda.current_stream(x.device)
        self._mm = matmul(x, w.t(), c=c, beta=1.0, stream=stream)
        self._mm.plan(stream=stream)
        self.device = x.device

    def __call__(self) -> torch.Tensor:
        """One cuBLASLt GEMM with the C epilogue, into a new tensor."""
        return self._mm.execute(stream=torch.cuda.current_stream(self.device))  # type: ignore[no-any-return]

    def __repr__(self) -> str:  # shown if a plan ever lands in a message
        return f"AddmmPlan(device={self.device})"


class MatmulPlan:
    """A planned and autotuned ``x @ w.T`` for these very tensors; call it to run it.

    ``autotune`` times every algorithm cuBLASLt's heuristic offers (a few calls each, in
    set-up) and keeps the fastest, where ``torch.mm`` takes the heuristic's first choice.
    """

    def __init__(self, x: torch.Tensor, w: torch.Tensor, autotune: bool = True) -> None:
        if not (x.is_cuda and w.is_cuda):
            raise DeviceError("needs CUDA tensors (cuBLASLt)")
        matmul = _matmul_class()
        stream = torch.cuda.current_stream(x.device)
        self._mm = matmul(x, w.t(), stream=stream)
        if autotune:
            plan_tuned(self._mm, stream)
        else:
            self._mm.plan(stream=stream)
        self.device = x.device

    def __call__(self) -> torch.Tensor:
        """One cuBLASLt GEMM into a new tensor."""
        return self._mm.execute(stream=torch.cuda.current_stream(self.device))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"MatmulPlan(device={self.device})"


class Fp8AddmmPlan:
    """``x @ w.T + c`` in FP8: x quantized with a fixed per-tensor scale in one pass (Triton,
    :mod:`solbench.kernels.fp8_quant`), then one FP8 cuBLASLt GEMM (e4m3 x e4m3, fp32 accumulation)
    with both scales applied on the device and ``c`` read as C into a separate D of c's dtype.

    ``w8`` is the FP8 weight ``[N, K]`` with its one-element float32 ``w_scale``; ``x_scale`` the
    one-element float32 activation scale (calibrated in set-up). cuBLASLt's FP8 kernels need
    M, N and K divisible by 16. Planned and autotuned here, for these very tensors.
    """

    def __init__(self, x: torch.Tensor, w8: torch.Tensor, w_scale: torch.Tensor, c: torch.Tensor,
                 x_scale: torch.Tensor) -> None:
        from solbench.kernels import fp8_quant

        if not (x.is_cuda and w8.is_cuda and c.is_cuda):
            raise DeviceError("needs CUDA tensors (cuBLASLt)")
        if any(d % 16 for d in (*x.shape, w8.shape[0])):
            raise ValueError(f"FP8 cuBLASLt needs M, N, K divisible by 16, got x {tuple(x.shape)}, w {tuple(w8.shape)}")
        fp8_quant._kernel()  # DeviceError now, in set-up, where Triton is missing
        matmul = _matmul_class()
        stream = torch.cuda.current_stream(x.device)
        self.x8 = torch.empty(x.shape, dtype=torch.float8_e4m3fn, device=x.device)
        self.inv = (1.0 / x_scale.float()).reshape(1).contiguous()
        self.quantize = fp8_quant.quantize
        self._mm = matmul(self.x8, w8.t(), c=c, beta=1.0, stream=stream,
                          quantization_scales={"a": x_scale.float().reshape(1), "b": w_scale.float().reshape(1)})
        plan_tuned(self._mm, stream, before=functools.partial(self.quantize, x, self.x8, self.inv))
        self.device = x.device

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Quantize ``x`` (one kernel), then the FP8 GEMM with the C epilogue into a new tensor."""
        self.quantize(x, self.x8, self.inv)
        return self._mm.execute(stream=torch.cuda.current_stream(self.device))  # type: ignore[no-any-return]

    def __repr__(self) -> str:
        return f"Fp8AddmmPlan(device={self.device})"
