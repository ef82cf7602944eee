"""JSON-ready dicts of comparisons and gate results. SI units: times in seconds,
ratios and thresholds as plain fractions; values that were not computed are null."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from solbench.analysis.compare import Comparison
from solbench.analysis.gate import CASE_VERDICTS, GateResult

__all__ = ["JSON_VERSION", "comparison_json", "gate_json"]

JSON_VERSION = 1


def comparison_json(c: Comparison) -> dict[str, Any]:
    """``{"kind": "comparison", settings..., "rows": [...], "only_in_a": [...], ...}``."""
    return {
        "kind": "comparison",
        "version": JSON_VERSION,
        "label_a": c.label_a,
        "label_b": c.label_b,
        "device": c.device,  # what the runs were measured on: "NVIDIA H200 (h200-sxm)"
        # one round a side: the ratio of the medians; over rounds: of the geometric means of the round medians
        "ratio": "b / a: of the medians (one round a side), else of the geometric means of the round medians",
        "threshold": c.threshold,
        "alpha": c.alpha,
        "confidence": c.confidence,
        "geomean_speedup": c.geomean_speedup,
        "geomean_rows": c.geomean_rows,  # the rows it is over: every row but parts (the byte floor)
        "counts": {v: c.count(v) for v in ("FASTER", "SLOWER", "SAME", "INCONCLUSIVE")},
        "rows": [asdict(r) for r in c.rows],
        "only_in_a": list(c.only_in_a),
        "only_in_b": list(c.only_in_b),
        "other_side": dict(c.other_side),
        "not_comparable": dict(c.not_comparable),
        "launched_differently": dict(c.launched_differently),
        "run_sd": c.run_sd,  # sd of a run's own offset priced in over rounds (0: none)
        # per side, the peaks id where sol_a/sol_b are against peaks measured on the host ("": datasheet)
        "measured_peaks": list(c.measured_peaks),
    }


def gate_json(g: GateResult, exit_code: int | None = None, required: Sequence[str] = ()) -> dict[str, Any]:
    """``{"kind": "gate", "overall": ..., "exit_code": ..., "verdicts": [...], ...}``.

    ``exit_code`` is the command's: ``ab`` and ``run --gate-against`` exit 4 where an implementation
    of the current tree failed, more severe than the gate's own 1 (``gate_exit_code``); ``required``:
    the MISSING keys ``gate --require-all`` fails on (``required_missing``)."""
    return {
        "kind": "gate",
        "version": JSON_VERSION,
        "overall": g.overall,
        "exit_code": g.exit_code if exit_code is None else exit_code,
        "gate_exit_code": g.exit_code,
        "device": g.device,  # what the runs were measured on: "NVIDIA H200 (h200-sxm)"
        "ratio": "median_current / median_baseline",
        "threshold": g.threshold,  # null: each workload's recorded gate_threshold, else 5%
        "alpha": g.alpha,
        "confidence": g.confidence,
        "reruns": g.reruns,
        "fingerprint_diffs": list(g.fingerprint_diffs),
        "cards": g.cards,  # "": one card (or unknown); else the sides ran on different cards of one model
        "load": g.load,  # "": the host's load alike (or unknown); else which side ran on a far busier host
        "counts": {v: g.count(v) for v in CASE_VERDICTS},
        "required_missing": list(required),  # MISSING cases the baseline measured that fail --require-all
        "verdicts": [asdict(v) for v in g.verdicts],
        "looks": g.looks,  # the error rates are split over this many looks (alpha / looks each)
        "run_sd": g.run_sd,  # sd of a run's own offset priced in over rounds (0: none, e.g. ab)
        "run_sd_source": g.run_sd_source,  # "--run-sd", a saved spread record's path, or the default
        "undecided": [{"key": v.key, "ratio": v.ratio, "ci_low": v.ci_low, "ci_high": v.ci_high,
                       "more_rounds": v.more_rounds, "current_rounds": v.current_rounds, "run_bound": v.run_bound,
                       "apart": v.apart, "reason": v.reason} for v in g.undecided],
    }
