"""What saving a run after every case costs (issue 16 item 2): a saved run's cases replayed through the
CLI's Saver as a run loop hands them over (each case re-scored in every round), timed.

    PYTHONPATH=. python bench/save_cost.py results/h200/issue16/oproj-adaptive.json --copies 8 --rounds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from solbench.cli.common import Saver
from solbench.results import store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("--copies", type=int, default=8, help="the run's cases repeated under new ids (a suite's size)")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    run = store.load(args.run)
    cases = [replace(c, case_id=f"{c.case_id}#{i}") for i in range(args.copies) for c in run.cases]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "run.json"
        saver = Saver(out, Path(folder), None, force=False)
        done: dict[str, object] = {}
        seconds, saves = 0.0, 0
        for _ in range(args.rounds):
            for case in cases:
                done[case.case_id] = replace(case, impls=tuple(case.impls))  # a new object: re-scored
                partial = replace(run, cases=tuple(done.values()))
                start = time.perf_counter()
                saver.save(partial)
                seconds += time.perf_counter() - start
                saves += 1
        start = time.perf_counter()
        saver.save(replace(run, cases=tuple(done.values())), final=True)
        final = time.perf_counter() - start
        size = out.stat().st_size / 1e6
        assert len(store.load(out).cases) == len(cases)
    print(f"{len(cases)} cases x {args.rounds} rounds: {saves} saves in {seconds:.2f} s "
          f"({seconds / saves * 1e3:.1f} ms each), final save {final:.2f} s, file {size:.1f} MB")


if __name__ == "__main__":
    main()
