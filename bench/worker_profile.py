"""Where a worker's time goes, function by function: merges the cProfile dumps that workers write
when ``SOLBENCH_PROFILE_DIR`` is set (``solbench/measure/pool.py``) and prints the top entries by
cumulative and by own time.

    SOLBENCH_PROFILE_DIR=/tmp/prof solbench run workloads/attn.yaml -w o_proj -q -o /tmp/run.json
    python bench/worker_profile.py /tmp/prof [--top 40]
"""
from __future__ import annotations

import argparse
import io
import pstats
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--dump", type=Path, help="also write the merged stats here (pstats format: callers, callees)")
    args = ap.parse_args()
    files = sorted(str(p) for p in args.folder.glob("worker-*.prof"))
    if not files:
        raise SystemExit(f"{args.folder}: no worker-*.prof files")
    stats = pstats.Stats(files[0], stream=io.StringIO())
    for f in files[1:]:
        stats.add(f)
    if args.dump:
        stats.dump_stats(args.dump)
    out = io.StringIO()
    stats.stream = out
    print(f"{len(files)} workers, {stats.total_tt:.2f} s profiled in all")
    stats.strip_dirs().sort_stats("cumulative").print_stats(args.top)
    stats.sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


if __name__ == "__main__":
    main()
