"""Roofline figures of runs (matplotlib, the optional ``plot`` extra). Returns PNG bytes.

One point per case x implementation: the case's arithmetic intensity (analytic FLOP per fused
byte) against the FLOP/s the implementation achieved (analytic FLOPs / median time). Every
implementation of a case shares the intensity, so fusion shows as a vertical arrow from the
baseline to the fused implementation. Roofs (Williams, Waterman and Patterson, 2009)::

    attainable(I) = min(peak compute, I x memory bandwidth)

drawn for every dtype in the runs from the peaks each case was scored against (datasheet, or
measured on the CPU), each labelled with where that ceiling came from, and, when a calibration is
given, the ceilings ``solbench calibrate`` measured, dashed. Per-case sample histograms come from
:func:`histograms_png`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from solbench.errors import ConfigError
from solbench.report.units import format_bytes, format_flops
from solbench.results.model import Calibration, CaseResult, RunResult

__all__ = ["Point", "Roof", "histograms_png", "impl_names", "roofline_png", "roofline_points", "roofs"]

_UNIT_OF = {"float64": "fp64", "float32": "fp32", "bfloat16": "bf16", "float16": "fp16",
            "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "int8": "int8"}
_MARKERS = "osD^vP*Xh<>p"


@dataclass(frozen=True)
class Point:
    """One implementation on one case: where it sits on the roofline."""

    workload: str
    case_id: str
    impl: str
    intensity: float  # FLOP per fused byte
    flops_per_s: float  # achieved, analytic FLOPs / median time
    is_baseline: bool
    run: int = 0  # the run's index among those drawn


@dataclass(frozen=True)
class Roof:
    """A compute ceiling (FLOP/s, flat) or a memory ceiling (bytes/s, slope 1)."""

    label: str
    kind: str  # "compute" or "memory"
    value: float  # FLOP/s or bytes/s
    measured: bool  # from `solbench calibrate` (drawn dashed) rather than the run's own peaks


def roofline_points(runs: Sequence[RunResult]) -> list[Point]:
    """Every scored implementation of every case (those with a positive intensity)."""
    points = []
    for k, run in enumerate(runs):
        for c in run.cases:
            for r in c.impls:
                if r.status == "ok" and r.score is not None and 0 < c.intensity < math.inf:
                    points.append(Point(c.workload, c.case_id, r.name, c.intensity, r.score.achieved_flops,
                                        r.name == c.baseline, k))
    return points


def point_labels(runs: Sequence[RunResult]) -> dict[str, int]:
    """The number each case's points carry in the roofline (1, 2, ... in order of first appearance);
    the HTML report lists them under the figure."""
    labels: dict[str, int] = {}
    for p in roofline_points(runs):
        labels.setdefault(p.case_id, len(labels) + 1)
    return labels


def roofs(runs: Sequence[RunResult], calibration: Calibration | None = None) -> list[Roof]:
    """The ceilings of every dtype in the runs, then the measured ones; units sharing a ceiling share
    one roof (``bf16/fp16 tensor 989 TFLOP/s``)."""
    found: dict[tuple[str, float, bool, str], dict[str, list[str]]] = {}

    def add(kind: str, unit: str, value: float, measured: bool, source: str, what: str = "") -> None:
        units = found.setdefault((kind, value, measured, source), {}).setdefault(what, [])
        if unit not in units:
            units.append(unit)

    cases = [c for run in runs for c in run.cases]
    for c in cases:
        unit, src = _UNIT_OF.get(c.dtype, c.dtype), c.peaks.source_of
        if c.peaks.tensor_flops:
            add("compute", unit, c.peaks.tensor_flops, False, src("tensor"), "tensor")
        add("compute", unit, c.peaks.vector_flops, False, src("vector"), "vector")
        add("memory", "memory", c.peaks.bandwidth, False, src("bandwidth"))
    if calibration is not None:
        units = {_UNIT_OF.get(c.dtype, c.dtype) for c in cases}
        for unit, rate in calibration.tensor_peaks.items():
            if unit in units:
                add("compute", unit, rate, True, "measured", "tensor")
        for unit, rate in calibration.vector_peaks.items():
            add("compute", unit, rate, True, "measured", "vector")
        add("memory", "memory", calibration.bandwidth, True, "measured")
    result = []
    for (kind, value, measured, source), groups in found.items():
        label = format_flops(value, "/s") if kind == "compute" else format_bytes(value, "/s")
        name = ", ".join(("/".join(units) + f" {what}").strip() for what, units in groups.items())
        result.append(Roof(f"{name} {label} ({source})", kind, value, measured))
    return sorted(result, key=lambda r: (r.measured, r.kind, -r.value))


def _figure(width: float, height: float, dpi: int = 100) -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("plots need matplotlib: pip install 'solbench[plot]'") from None
    return Figure(figsize=(width, height), dpi=dpi, layout="constrained")


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    return buf.getvalue()


def _colors(names: Sequence[str], baseline_names: set[str]) -> dict[str, str]:
    palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf",
               "#bcbd22"]
    others = [n for n in names if n not in baseline_names]
    colors = {n: palette[i % len(palette)] for i, n in enumerate(others)}
    colors.update({n: "#7f7f7f" for n in baseline_names})
    return colors


def impl_names(runs: Sequence[RunResult]) -> list[str]:
    """Every implementation name in the runs, sorted: pass it to :func:`histograms_png` so that an
    implementation keeps its colour across figures."""
    return sorted({r.name for run in runs for c in run.cases for r in c.impls})


def _arrows(points: Sequence[Point]) -> list[tuple[Point, Point]]:
    """Per case of each run: baseline -> the implementation named "fused", else the fastest other one."""
    by_case: dict[tuple[int, str], list[Point]] = {}
    for p in points:
        by_case.setdefault((p.run, p.case_id), []).append(p)
    pairs = []
    for pts in by_case.values():
        base = next((p for p in pts if p.is_baseline), None)
        others = [p for p in pts if not p.is_baseline]
        if base is None or not others:
            continue
        target = next((p for p in others if p.impl == "fused"), max(others, key=lambda p: p.flops_per_s))
        pairs.append((base, target))
    return pairs


def roofline_png(runs: Sequence[RunResult], calibration: Calibration | None = None,
                 title: str | None = None) -> bytes:
    """The roofline of the runs as a PNG image."""
    points = roofline_points(runs)
    ceilings = roofs(runs, calibration)
    fig = _figure(10, 6.5)
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    xs = [p.intensity for p in points] or [1.0]
    compute = [r.value for r in ceilings if r.kind == "compute"] or [1.0]
    memory = [r.value for r in ceilings if r.kind == "memory"] or [1.0]
    ridges = [c / m for c in compute for m in memory]
    x_lo, x_hi = min(xs + ridges) / 4, max(xs + ridges) * 4
    ys = [p.flops_per_s for p in points] or [min(compute)]
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min([*ys, min(memory) * x_lo]) / 3, max(compute) * 2.5)
    _draw_roofs(ax, ceilings, x_lo, x_hi, min(compute))
    names = sorted({p.impl for p in points})
    colors = _colors(impl_names(runs), {c.baseline for run in runs for c in run.cases if c.baseline})
    workloads = sorted({p.workload for p in points})
    markers = {w: _MARKERS[i % len(_MARKERS)] for i, w in enumerate(workloads)}
    for base, target in _arrows(points):
        ax.annotate("", xy=(target.intensity, target.flops_per_s), xytext=(base.intensity, base.flops_per_s),
                    arrowprops={"arrowstyle": "->", "color": "#999999", "lw": 0.8})
    labels = point_labels(runs)
    for p in points:
        ax.scatter(p.intensity, p.flops_per_s, marker=markers[p.workload], color=colors[p.impl], s=28,
                   edgecolors="black", linewidths=0.3, zorder=3)
        ax.annotate(str(labels[p.case_id]), (p.intensity, p.flops_per_s), xytext=(4, 3),
                    textcoords="offset points", fontsize=6, color="#333333", zorder=4)
    _legend(ax, names, colors, workloads, markers)
    ax.set_xlabel("arithmetic intensity (analytic FLOP per fused byte)")
    ax.set_ylabel("achieved FLOP/s (analytic FLOPs / median time)")
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title or _title(runs), fontsize=10)
    return _png(fig)


def _draw_roofs(ax: Any, ceilings: Sequence[Roof], x_lo: float, x_hi: float, lowest_compute: float) -> None:
    """Roof lines with their labels: the run's peaks solid (labels above), measured dashed (below);
    a label that would overlap an earlier one moves left."""
    placed: list[tuple[float, float]] = []

    def free_x(x: float, y: float) -> float:
        while any(abs(math.log10(y / py)) < 0.08 and abs(math.log10(x / px)) < 1.0 for px, py in placed):
            x /= 12
        placed.append((x, y))
        return x

    for roof in ceilings:
        color = "#b8860b" if roof.measured else "#444444"
        ax_kw = {"color": color, "lw": 1.2, "ls": "--" if roof.measured else "-"}
        text_kw = {"fontsize": 7, "color": color, "ha": "right", "va": "top" if roof.measured else "bottom"}
        nudge = 1 / 1.06 if roof.measured else 1.06
        if roof.kind == "compute":
            ax.axhline(roof.value, **ax_kw)
            ax.text(free_x(x_hi / 1.1, roof.value), roof.value * nudge, roof.label, **text_kw)
        else:
            ax.plot([x_lo, x_hi], [roof.value * x_lo, roof.value * x_hi], **ax_kw)
            x, above = lowest_compute / roof.value / 4, 1.6  # ends left of the lowest ridge if there is room
            if x < x_lo * 8:  # else starts at the left edge, under the rising line
                x, above, text_kw["ha"], text_kw["va"] = x_lo * 1.3, 0.4, "left", "top"
            y = roof.value * x * (above * 0.35 if roof.measured else above)
            ax.text(x, max(y, ax.get_ylim()[0] * 3), roof.label, **text_kw)


def _legend(ax: Any, names: Sequence[str], colors: dict[str, str], workloads: Sequence[str],
            markers: dict[str, str]) -> None:
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], ls="", marker="o", color=colors[n], label=n) for n in names]
    handles += [Line2D([], [], ls="", marker=markers[w], color="white", markeredgecolor="black", label=w)
                for w in workloads]
    ax.legend(handles=handles, fontsize=7, loc="lower right", ncols=2, framealpha=0.9)


def _title(runs: Sequence[RunResult]) -> str:
    devices = sorted({r.environment.device_name for r in runs})
    return f"roofline: {', '.join(devices)} ({len(roofline_points(runs))} points)"


def histograms_png(cases: Sequence[CaseResult], columns: int = 4, names: Sequence[str] = ()) -> bytes | None:
    """Sample histograms, one panel per case (log-spaced bins, one colour per implementation;
    pass every implementation name in ``names`` to keep colours as in the roofline); None where no
    case has samples (a dry run, or nothing timed): no blank figure."""
    shown = [c for c in cases if any(r.timing is not None and r.timing.samples for r in c.impls)]
    if not shown:
        return None
    rows = math.ceil(len(shown) / columns)
    fig = _figure(3.2 * min(columns, len(shown)), 2.3 * rows, dpi=80)
    names = sorted(set(names) | {r.name for c in shown for r in c.impls})
    colors = _colors(names, {c.baseline for c in shown if c.baseline})
    for i, c in enumerate(shown):
        ax = fig.add_subplot(rows, min(columns, len(shown)), i + 1)
        measured = [r for r in c.impls if r.timing is not None and r.timing.samples]
        lo = min(min(r.timing.samples) for r in measured)  # type: ignore[union-attr]
        hi = max(max(r.timing.samples) for r in measured)  # type: ignore[union-attr]
        hi = hi if hi > lo else lo * 1.01
        edges = [lo * (hi / lo) ** (k / 30) * 1e6 for k in range(31)]
        bars = [ax.hist([s * 1e6 for s in r.timing.samples], bins=edges, alpha=0.55,  # type: ignore[union-attr]
                        color=colors[r.name])[2] for r in measured]
        if hi / lo > 4:  # a log axis only where the implementations differ by a lot
            from matplotlib.ticker import NullFormatter

            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_title(_short(c), fontsize=7, parse_math=False)  # a parameter's `$` is text, not mathtext
        ax.tick_params(labelsize=6)
        ax.set_xlabel("µs per call", fontsize=6)
        ax.legend(bars, [r.name for r in measured], fontsize=5)  # named: a gathered legend drops names with `_`
    return _png(fig)


def _short(c: CaseResult) -> str:
    return " ".join(f"{k}={v}" for k, v in c.params.items()) + f" {c.dtype}"
