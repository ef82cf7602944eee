"""The shipped suite on one GPU and on every GPU of the node: wall time and per-case agreement (issue 11).

    python3 bench/scale_devices.py --out DIR [--no-tsol] [FILES ...]

Runs, in this order (one-GPU runs on both sides of the sharded ones, so drift shows up as a
difference between the two one-GPU runs):

    one-a     solbench run FILES -q -o DIR/one-a.json --devices 0
    all       solbench run FILES -q -o DIR/all.json --devices all --schedule-from DIR/one-a.json
    all-tsol  solbench run FILES -q -o DIR/all-tsol.json --devices all --results-dir DIR/empty
              (the schedule from T_SOL alone: no earlier run to learn case times from)
    one-b     solbench run FILES -q -o DIR/one-b.json --devices 0

and prints Markdown tables: wall times and their ratio to the mean one-GPU time; cases and busy
time (sum of per-task times) per GPU; and per-case median agreement: the quantiles of
|median_x / median_one-a - 1| over every key measured ok in all runs, for x = one-b (the
run-to-run noise between two one-GPU runs) and x = all, all-tsol, with solbench compare's
verdicts (SAME / INCONCLUSIVE / FASTER / SLOWER at 5%). DIR/summary.json holds the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

SUITE = ["workloads/attn.yaml", "workloads/bert.yaml", "workloads/resnet50.yaml"]


def _run(name: str, files: list[str], out: Path, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "solbench", "run", *files, "-q", "-o", str(out / f"{name}.json"), "--force", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    (out / f"{name}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 4):  # 4: an implementation failed; the run is still whole
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall


def _medians(run) -> dict[str, float]:
    return {f"{c.case_id}/{r.name}": r.timing.median for c in run.cases for r in c.impls
            if r.status == "ok" and r.timing is not None and r.timing.n}


def _quantiles(devs: list[float]) -> str:
    if not devs:
        return "- | - | -"
    devs = sorted(devs)
    p90 = devs[min(len(devs) - 1, int(0.9 * len(devs)))]
    return f"{statistics.median(devs):.2%} | {p90:.2%} | {devs[-1]:.2%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", default=SUITE)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--no-tsol", action="store_true", help="skip the T_SOL-only schedule")
    parser.add_argument("--one-run", action="store_true", help="skip the second one-GPU run (its noise)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds per run (solbench run --repeat)")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    plan = [("one-a", ["--devices", "0"]),
            ("all", ["--devices", "all", "--schedule-from", str(out / "one-a.json")])]
    if not args.no_tsol:
        plan.append(("all-tsol", ["--devices", "all", "--results-dir", str(out / "empty")]))
    if not args.one_run:
        plan.append(("one-b", ["--devices", "0"]))
    walls = {}
    for name, extra in plan:
        walls[name] = _run(name, args.files, out, [*extra, "--repeat", str(args.repeat)])
        print(f"{name}: {walls[name]:.1f} s", file=sys.stderr)
    report(out, walls)


def report(out: Path, walls: dict[str, float]) -> None:
    """The tables of the module docstring from DIR/<run>.json and each run's wall time."""
    from solbench.analysis.compare import compare_runs
    from solbench.results import store

    runs = {name: store.load(out / f"{name}.json") for name in walls}
    one = statistics.mean([wall for name, wall in walls.items() if name.startswith("one-")])
    print("| run | wall time | / mean one-GPU |\n|---|---|---|")
    for name, wall in walls.items():
        print(f"| {name} | {wall:.1f} s | {wall / one:.3f} |")

    print("\n| run | GPU | cases | busy (sum of task_s) |\n|---|---|---|---|")
    for name, run in runs.items():
        per: dict[str, list[float]] = {}
        for c in run.cases:
            gpu = f"{c.device.device_index}: {c.device.device_name}" if c.device else "-"
            per.setdefault(gpu, []).append(sum(float(r.protocol.get("task_s", 0.0)) for r in c.impls))
        for gpu, spent in sorted(per.items()):
            print(f"| {name} | {gpu} | {len(spent)} | {sum(spent):.1f} s |")

    med = {name: _medians(run) for name, run in runs.items()}
    keys = sorted(set.intersection(*(set(m) for m in med.values())))
    print(f"\n{len(keys)} keys ok in every run; |median / median(one-a) - 1|:\n")
    print("| vs one-a | median | p90 | max | compare (5%) |\n|---|---|---|---|---|")
    summary = {"walls_s": walls, "keys": len(keys), "deviation": {}}
    for name in [n for n in walls if n != "one-a"]:
        devs = [abs(med[name][k] / med["one-a"][k] - 1) for k in keys]
        c = compare_runs(runs["one-a"], runs[name])
        verdicts = ", ".join(f"{c.count(v)} {v.lower()}" for v in ("SAME", "INCONCLUSIVE", "FASTER", "SLOWER"))
        print(f"| {name} | {_quantiles(devs)} | {verdicts} |")
        summary["deviation"][name] = {"median": statistics.median(devs) if devs else None,
                                      "max": max(devs) if devs else None,
                                      "verdicts": {v: c.count(v) for v in ("SAME", "INCONCLUSIVE", "FASTER", "SLOWER")}}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
