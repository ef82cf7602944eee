"""Where a run's wall time went (``RunResult.harness``): one row per phase, with its share.

    detect + prepare + compile ahead + workers + tasks + save + other = wall
    workers holds the wait for retired workers to exit (their CUDA teardown), while the next
            workers start
    tasks = side by side + set-up + checks + sampling + after-checks (alone, and side by side)
            + messaging (as the workers report them; side by side: the wall time while workers set
            up and check at once, the workers' own seconds below it summed, so more than that wall
            time; set-up and checks
            alone: tasks run one at a time, and what a tuning worker does after it took its turn
            early, while the others wait)
    GPU busy (spin + flush + timed call) / wall: how much of the run the device spent measuring
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from solbench.results.model import RunResult

_ROWS = (
    ("detect_s", "detect the device", 0),
    ("prepare_s", "plan, cost and check the workloads", 0),
    ("compile_ahead_s", "compile ahead (torch.compile, processes side by side)", 0),
    ("workers_s", "start and retire worker processes", 0),
    ("reap_s", "waiting for retired workers to exit (their teardown, beside the next start)", 1),
    ("tasks_s", "tasks (waiting on workers)", 0),
    ("side_s", "set-up and checks, workers side by side (wall)", 1),
    ("side_setup_s", "inputs, references, set-up and compilation (sum over workers)", 2),
    ("side_check_s", "correctness checks (sum over workers)", 2),
    ("capture_s", "CUDA graphs captured, their replays checked (sum over workers, in set-up)", 2),
    ("setup_s", "set-up alone (tasks run alone; a tuning worker after its turn)", 1),
    ("check_s", "correctness checks alone", 1),
    ("sample_s", "timing loop (spin, flush, call, verify, clocks)", 1),
    ("after_s", "anti-cheat checks after timing (tasks run alone)", 1),
    ("side_after_s", "anti-cheat checks after timing, workers side by side (wall)", 1),
    ("side_after_sum_s", "the checks after timing, fresh inputs and references included (sum over workers)", 2),
    ("save_s", "write the partial run after each case", 0),
)
# what tasks_s holds; the rest: messaging
_TASK_PARTS = ("side_s", "setup_s", "check_s", "sample_s", "after_s", "side_after_s")


def harness_rows(run: RunResult) -> list[tuple[str, str, float, float | None]]:
    """(key, label, seconds, share of the wall time) for every recorded phase, then "other" (the
    wall time no phase accounts for), "messaging" inside tasks, and the GPU-busy ratio."""
    h = run.harness
    wall = h.get("wall_s")
    rows: list[tuple[str, str, float, float | None]] = []
    inside = sum(h.get(k, 0.0) for k in _TASK_PARTS)
    for key, label, depth in _ROWS:
        if key == "save_s" and "tasks_s" in h and inside:  # the last row inside tasks
            rest = max(h["tasks_s"] - inside, 0.0)
            rows.append(("messaging_s", "  messaging and worker bookkeeping", rest, rest / wall if wall else None))
        if key in h:
            rows.append((key, ("  " * depth) + label, h[key], h[key] / wall if wall else None))
    if wall:
        top = sum(h.get(k, 0.0) for k, _, depth in _ROWS if depth == 0)
        rows.append(("other_s", "other (rendering, scoring, end clocks)", max(wall - top, 0.0),
                     max(wall - top, 0.0) / wall))
        rows.append(("wall_s", "wall", wall, 1.0))
    if "gpu_busy_s" in h:
        rows.append(("gpu_busy_s", "GPU busy: spin + flush + timed call", h["gpu_busy_s"],
                     h["gpu_busy_s"] / wall if wall else None))
    return rows


def queue_line(run: RunResult) -> str | None:
    """How many of the run's point-rounds ran in a worker with one CUDA work queue
    (:mod:`solbench.measure.queues`), or None where none did."""
    rounds = one = 0
    for case in run.cases:
        for r in case.impls:
            if r.timing is not None:
                rounds += r.timing.n_rounds
                one += int(r.protocol.get("one_queue_rounds", 0))
    if not one:
        return None
    return f"{one} of {rounds} point-rounds ran in a worker with one CUDA work queue (SOLBENCH_WORK_QUEUES)"


def memory_line(run: RunResult) -> str | None:
    """The most device memory a worker's allocator held for one point (``memory_peak_bytes``: a GPU
    run's; the CUDA context is beside it), and where; None where no point recorded it."""
    peaks = [(int(r.protocol["memory_peak_bytes"]), c.case_id, r.name) for c in run.cases for r in c.impls
             if "memory_peak_bytes" in r.protocol]
    if not peaks:
        return None
    peak, case_id, name = max(peaks)
    return (f"largest worker memory: {peak / 2**30:.2f} GiB at {case_id} {name} "
            "(torch's allocator at its peak; a CUDA context beside it)")


def passes_line(run: RunResult) -> str | None:
    """How many passes over the workloads started workers, and how many worker processes they
    started (``RunResult.harness``), or None where the run recorded neither (in-process, older runs)."""
    h = run.harness
    if "passes" not in h and "worker_processes" not in h:
        return None
    passes = int(h.get("passes", 0))
    line = f"{passes} pass{'es' if passes != 1 else ''} over the workloads"
    if "worker_processes" not in h:  # in-process: no workers
        return line
    workers = int(h["worker_processes"])
    line = f"{line}, {workers} worker process{'es' if workers != 1 else ''} started (one per implementation and round)"
    killed = int(h.get("workers_killed", 0)) + int(h.get("compile_ahead_killed", 0))
    if killed:  # each waited for (pool.EXIT_WAIT_S), and its exit's finalizers skipped
        line += (f"; {killed} killed for not exiting when asked"
                 f" ({int(h.get('compile_ahead_killed', 0))} of them compiling ahead)")
    escaped = int(h.get("escaped_killed", 0))
    if escaped:  # an implementation's setsid() escape (pool.sweep)
        line += f"; {escaped} process{'es' if escaped != 1 else ''} left outside a worker's group killed"
    return line


def harness_table(run: RunResult) -> Table:
    """The breakdown as a rich table (``solbench show --harness``), with the passes, work-queue and
    worker-memory lines below."""
    lines = "\n".join(line for line in (passes_line(run), queue_line(run), memory_line(run)) if line)
    caption = Text(lines) if lines else None  # it names a case: ``w[n=64,float32]``, never markup
    t = Table(title="where the run's wall time went", title_justify="left", caption=caption,
              caption_justify="left")
    t.add_column("phase")
    t.add_column("seconds", justify="right")
    t.add_column("of wall", justify="right")
    for _, label, seconds, share in harness_rows(run):
        t.add_row(label, f"{seconds:.2f}", f"{share:.1%}" if share is not None else "")
    return t
