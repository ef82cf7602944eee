"""How long N CUDA workers take to start side by side (fork, CUDA context, cuBLAS, CUPTI, the gate):
does the wait grow with N (the driver serializes context creation) or stay flat?

    PYTHONPATH=. python3 bench/worker_start.py [--cpu] [N ...]   # default 1 7 14 28, each twice

Prints one line per start: N, seconds from the first fork to the last ready, seconds per worker.
The fork server is started (and its preloads imported) by a first throwaway worker, outside the times.
"""

import sys
import time

from solbench.measure import pool


def main() -> None:
    device = "cpu" if "--cpu" in sys.argv else "cuda"
    counts = [int(a) for a in sys.argv[1:] if a != "--cpu"] or [1, 7, 14, 28]
    pool.preload_libraries()
    warm = pool.Pool(device, 0 if device == "cuda" else None)
    warm.prestart([("warm", "up")])
    warm.close()
    print(f"{'workers':>8} {'wall s':>8} {'s/worker':>9}")
    for n in counts:
        for _ in range(2):
            p = pool.Pool(device, 0 if device == "cuda" else None)
            t0 = time.perf_counter()
            p.prestart([("start", f"w{k}") for k in range(n)])
            wall = time.perf_counter() - t0
            p.close()
            print(f"{n:>8} {wall:>8.2f} {wall / n:>9.3f}", flush=True)


if __name__ == "__main__":
    main()
