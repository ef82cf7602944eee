"""Cross-check solbench's CUPTI timer on KernelBench level-1 problems against two timings written here.

Run on one GPU from the repository root (cupti-python installed: pip install 'solbench[cupti]'):

    PYTHONPATH=. python bench/kernelbench_cupti_crosscheck.py .kb/KernelBench/level1 -n 10 --out kb_cupti.json

Each problem (a KernelBench file; a folder gives its first N problems by number) is timed three ways:
  solbench   `solbench run FILES --device cuda --timer cupti -i baseline --repeat 1` (one subprocess
             for all problems); the median of its samples
  crosscheck SOL-ExecBench-style CUPTI timing, independent of solbench's code: WARMUP calls, then
             TRIALS timed calls, each on fresh inputs (device clones of the input set) after an L2
             flush (a 2 x L2 buffer written); a call's time is the first start to the last end of
             the kernel, memcpy and memset records (any stream) CUPTI recorded for that call alone
             (records are flushed and dropped right before the call); the median over TRIALS
  events     KernelBench's original method: CUDA events around each call on the same inputs, no
             flush, the mean over EVENT_TRIALS calls after EVENT_WARMUP warm-up calls (timed first,
             CUPTI collection off; KernelBench's current timing.py also flushes L2 before each call)
Inputs and weights are built as KernelBench builds them: set_seed(42) before get_inputs(), before
get_init_inputs() and before Model(*init); the model and the tensors then moved to the GPU.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

SEED = 42
WARMUP, TRIALS = 10, 50
EVENT_WARMUP, EVENT_TRIALS = 5, 100


def problem_files(paths: list[str], count: int) -> list[Path]:
    """The problem files named (a folder: its .py files by problem number), the first ``count``."""
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = [f for f in p.glob("*.py") if f.name.split("_", 1)[0].isdigit()]
            files += sorted(found, key=lambda f: int(f.name.split("_", 1)[0]))
        else:
            files.append(p)
    return [f.resolve() for f in files[:count]]


def set_seed(seed: int) -> None:  # KernelBench's src/kernelbench/eval.py
    torch.manual_seed(seed)
    torch.cuda.manual_seed(seed)


def load_problem(path: Path) -> tuple[torch.nn.Module, list]:
    """Model(*get_init_inputs()) and get_inputs(), seeded and moved to the GPU as KernelBench does."""
    spec = importlib.util.spec_from_file_location(f"kb_problem_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    set_seed(SEED)
    inputs = module.get_inputs()
    set_seed(SEED)
    init = module.get_init_inputs()
    set_seed(SEED)
    model = module.Model(*init).cuda()
    return model, [x.cuda() if isinstance(x, torch.Tensor) else x for x in inputs]


def solbench_medians(files: list[Path], out: Path, run: bool = True) -> dict[str, float]:
    """Median seconds per problem file (its resolved path) from one `solbench run --timer cupti`
    subprocess writing ``out`` (``run=False``: read an earlier run's ``out``)."""
    if run:
        cmd = [sys.executable, "-m", "solbench", "run", *map(str, files), "--device", "cuda", "--timer", "cupti",
               "-i", "baseline", "--repeat", "1", "--timeout", "300", "-o", str(out), "--force", "-q"]
        print("$", " ".join(cmd), flush=True)
        rc = subprocess.run(cmd, check=False).returncode
        if not out.is_file():
            raise SystemExit(f"solbench run exited {rc} and wrote no result")
    medians = {}
    for case in json.loads(out.read_text())["cases"]:
        path = case["source"].removeprefix("kernelbench:").rsplit("@", 1)[0]
        for impl in case["impls"]:
            if impl["name"] == "baseline" and impl["status"] == "ok" and impl.get("timing"):
                medians[path] = impl["timing"]["median"]
    return medians


class Cupti:
    """GPU activity records (kernels, memcpys, memsets) through cupti-python's activity API;
    collected only between ``enable()`` and ``disable()`` (the event timing runs without it)."""

    def __init__(self) -> None:
        from cupti import cupti

        self.cupti = cupti
        self.kinds = [cupti.ActivityKind.CONCURRENT_KERNEL, cupti.ActivityKind.MEMCPY, cupti.ActivityKind.MEMSET]
        self.records: list[tuple[int, int]] = []
        cupti.activity_register_callbacks(lambda: (8 << 20, 0), self._completed)

    def enable(self) -> None:
        for kind in self.kinds:
            self.cupti.activity_enable(kind)

    def _completed(self, activities: list) -> None:
        wanted = {int(k) for k in self.kinds}
        self.records += [(int(a.start), int(a.end)) for a in activities if int(a.kind) in wanted]

    def take(self) -> list[tuple[int, int]]:
        """Every record since the last take (synchronize the device first)."""
        self.cupti.activity_flush_all(1)
        records, self.records = self.records, []
        return records

    def disable(self) -> None:
        self.take()
        for kind in self.kinds:
            self.cupti.activity_disable(kind)


def fresh(inputs: list) -> list:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]


def crosscheck_cupti(model: torch.nn.Module, inputs: list, tracer: Cupti, flush: torch.Tensor) -> float:
    """Median seconds of TRIALS calls, each on fresh inputs after an L2 flush, from CUPTI's records."""
    for _ in range(WARMUP):
        model(*fresh(inputs))
    times = []
    tracer.enable()
    try:
        for _ in range(TRIALS):
            args = fresh(inputs)
            flush.fill_(1)  # write 2 x L2: the call starts with a cold cache
            torch.cuda.synchronize()
            tracer.take()  # drop the records of the clones and the flush
            model(*args)
            torch.cuda.synchronize()
            records = tracer.take()
            if not records:
                raise RuntimeError("CUPTI recorded no GPU activity for the call")
            times.append((max(e for _, e in records) - min(s for s, _ in records)) * 1e-9)
    finally:
        tracer.disable()
    return statistics.median(times)


def kernelbench_events(model: torch.nn.Module, inputs: list) -> float:
    """Mean seconds of EVENT_TRIALS calls timed with CUDA events on the same inputs, no flush."""
    for _ in range(EVENT_WARMUP):
        model(*inputs)
    torch.cuda.synchronize()
    times = []
    for _ in range(EVENT_TRIALS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(*inputs)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.fmean(times)


def measure(path: Path, tracer: Cupti, flush: torch.Tensor) -> dict:
    model, inputs = load_problem(path)
    try:
        with torch.no_grad():
            events = kernelbench_events(model, inputs)  # first: no CUPTI collection on
            return {"crosscheck_cupti_s": crosscheck_cupti(model, inputs, tracer, flush),
                    "kernelbench_events_s": events}
    finally:
        del model, inputs
        torch.cuda.empty_cache()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problems", nargs="+", help="KernelBench problem files, or a level folder")
    ap.add_argument("-n", "--count", type=int, default=10, help="how many problems (default 10)")
    ap.add_argument("--out", required=True, help="write the rows as JSON here")
    ap.add_argument("--solbench-json", help="reuse this solbench run instead of running one")
    args = ap.parse_args()
    files = problem_files(args.problems, args.count)
    run_json = Path(args.solbench_json or Path(args.out).with_suffix(".solbench.json"))
    medians = solbench_medians(files, run_json, run=not args.solbench_json)  # before this process uses the GPU
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    tracer = Cupti()
    rows = []
    print(f"{'problem':<48} {'solbench us':>12} {'crosscheck us':>14} {'ratio':>7} {'KB events us':>13}")
    for path in files:
        row: dict = {"problem": path.name, "path": str(path), "solbench_cupti_s": medians.get(str(path))}
        try:
            row.update(measure(path, tracer, flush))
        except Exception as exc:  # one problem's failure (OOM, an op CUDA lacks) does not end the table
            row["error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        sol, cross = row.get("solbench_cupti_s"), row.get("crosscheck_cupti_s")
        row["ratio"] = sol / cross if sol and cross else None
        rows.append(row)
        us = [f"{row[k] * 1e6:.2f}" if row.get(k) else "-" for k in
              ("solbench_cupti_s", "crosscheck_cupti_s", "kernelbench_events_s")]
        ratio = f"{row['ratio']:.3f}" if row["ratio"] else "-"
        print(f"{path.stem[:48]:<48} {us[0]:>12} {us[1]:>14} {ratio:>7} {us[2]:>13}"
              + (f"  {row['error']}" if "error" in row else ""), flush=True)
    meta = {"device": torch.cuda.get_device_name(), "l2_bytes": l2, "torch": torch.__version__,
            "solbench_run": str(run_json), "crosscheck": {"warmup": WARMUP, "trials": TRIALS, "stat": "median"},
            "kernelbench_events": {"warmup": EVENT_WARMUP, "trials": EVENT_TRIALS, "stat": "mean"}}
    Path(args.out).write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
