"""Where a CUDA worker's start goes, step by step, with N workers starting side by side.

    PYTHONPATH=.:bench python3 -c "import worker_steps; worker_steps.main()" [N ...]   # default 1 7 14

(imported, not run as a script: the fork server unpickles ``steps`` by its module name)

Each process is forked by the same fork server as a run's workers (solbench.measure.pool) and
repeats the CUDA steps of ``pool._work`` with a timestamp after each: the device count (cuInit),
``set_device`` (the context), the two warm-up matmuls (cuBLAS handles, lazily loaded modules), the
CUPTI warm-up and the timer's gate. Prints, per N, the median and the largest seconds of each step
over the workers, and the wall time from the first fork to the last report: a step whose median
grows with N is serialized somewhere (the driver, a lock), one that stays flat is not.

Then each worker allocates ``HOLD_GB`` GiB (environment, default 2; what a run's worker keeps
cached: inputs, flush buffer, workspace), and the last column is the wall time from asking all N
to exit to the last one gone (their CUDA teardown side by side; the run's harness counts this wait
as ``reap_s``). With ``BUSY=1`` another process keeps the GPU busy with bf16 GEMMs meanwhile, as the
case's other workers' set-up would (the twenty-ninth session's early retire: exits then took 3-10x
longer; does a teardown wait on another process's work?).
"""

import itertools
import os
import statistics
import sys
import time

from solbench.measure import pool

STEPS = ("fork", "cuInit", "context", "cublas", "cupti", "gate")
HOLD_GB = float(os.environ.get("HOLD_GB", "2"))
BUSY = os.environ.get("BUSY") == "1"


def busy(conn) -> None:
    """GEMMs on the GPU until told to stop (a worker setting up beside the ones that exit)."""
    import torch

    torch.cuda.set_device(0)
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    conn.send("busy")
    while not conn.poll():
        for _ in range(10):
            a @ a
        torch.cuda.synchronize()
    conn.close()


def steps(conn, t_fork: float) -> None:
    import torch

    marks = [time.time() - t_fork]
    pool._count_devices_once(torch)
    marks.append(time.time())
    torch.cuda.set_device(0)
    torch.zeros(1, device="cuda")
    marks.append(time.time())
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.ones(64, 64, device="cuda", dtype=dtype)
        (a @ a).sum().item()
    marks.append(time.time())
    from solbench.measure import guards

    guards.warm_tracer("cuda")
    marks.append(time.time())
    from solbench.device.timer import process_gate

    process_gate(torch)
    marks.append(time.time())
    conn.send([marks[0]] + [b - a for a, b in itertools.pairwise(marks[1:])] + [marks[1] - t_fork - marks[0]])
    held = torch.empty(int(HOLD_GB * (1 << 30)), dtype=torch.uint8, device="cuda")
    held.fill_(1)
    torch.cuda.synchronize()
    conn.send("held")
    conn.recv()  # exit now
    conn.close()


def main() -> None:
    counts = [int(a) for a in sys.argv[1:]] or [1, 7, 14]
    pool.preload_libraries()
    ctx = pool._context()
    warm = pool.Pool("cuda", 0)
    warm.prestart([("warm", "up")])  # the fork server up, its preloads imported
    warm.close()
    print(f"{'N':>3} {'wall':>6}  " + "  ".join(f"{s:>13}" for s in STEPS) + f"  exit ({HOLD_GB:g} GiB each"
          + (", GPU busy" if BUSY else "") + ")"
          "   (median / max s)")
    for n in counts:
        t0 = time.time()
        pipes, procs = [], []
        for _ in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=steps, args=(child, time.time()))
            pool.start(p)
            child.close()
            pipes.append(parent)
            procs.append(p)
        rows = [c.recv() for c in pipes]
        wall = time.time() - t0
        assert all(c.recv() == "held" for c in pipes)
        if BUSY:
            load, load_child = ctx.Pipe()
            loader = ctx.Process(target=busy, args=(load_child,))
            pool.start(loader)
            load_child.close()
            assert load.recv() == "busy"
        t_exit = time.time()
        for c in pipes:
            c.send("exit")
        for p in procs:
            p.join()
        gone = time.time() - t_exit
        if BUSY:
            load.send("stop")
            loader.join()
        # rows: [fork, context, cublas, cupti, gate, cuInit]: put cuInit second
        cols = list(zip(*[[r[0], r[5], r[1], r[2], r[3], r[4]] for r in rows], strict=True))
        print(f"{n:>3} {wall:>6.2f}  " + "  ".join(f"{statistics.median(c):>6.3f}/{max(c):>6.3f}" for c in cols)
              + f"  {gone:>8.3f}", flush=True)


if __name__ == "__main__":
    main()
