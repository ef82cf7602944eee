"""The INVALID rule and scoring of one case (pure)."""

from solbench.analysis.scoring import ImplPeaks, score_impls, time_floor
from solbench.results.model import Cost, Peaks
from tests.unit.factories import make_impl

COST = Cost("float32", tensor_flops=2e9, vector_flops=0.0, fused_bytes=4e6, unfused_bytes=4e6)
SHEET = Peaks(tensor_flops=1e12, vector_flops=1e11, bandwidth=1e12, source="datasheet")
MEASURED = Peaks(tensor_flops=8e11, vector_flops=1e11, bandwidth=8e11, source="measured")
# T_SOL against the sheet: max(2e9 / 1e12, 4e6 / 1e12) = 2 ms; against measured: 2.5 ms


def test_gpu_floor_is_t_sol_at_the_highest_peaks():
    assert time_floor(COST, SHEET, "cuda") == 2e-3


def test_below_datasheet_t_sol_is_invalid_even_when_scored_against_measured_peaks():
    impls = [make_impl("baseline", [3e-3] * 10), make_impl("fast", [1.9e-3] * 10),
             make_impl("near", [2.2e-3] * 10)]
    peaks = {n: ImplPeaks(MEASURED, SHEET) for n in ("baseline", "fast", "near")}
    out = {r.name: r for r in score_impls(COST, impls, peaks, "baseline", "cuda")}
    assert out["fast"].status == "invalid" and out["fast"].score is None
    # faster than the measured ceiling but not the datasheet: reported, SOL above 1
    assert out["near"].status == "ok" and out["near"].score.sol > 1.0
    assert out["baseline"].score.speedup == 1.0


def test_cpu_sanity_floor_allows_cache_speed_but_not_skipped_work():
    cpu = Peaks(tensor_flops=None, vector_flops=1e11, bandwidth=1e10, source="measured")
    mem_cost = Cost("float32", 0.0, 1e3, fused_bytes=1e6, unfused_bytes=1e6)  # T_SOL = 100 µs (memory)
    assert time_floor(mem_cost, cpu, "cpu") == 1e-4 / 100
    impls = [make_impl("baseline", [2e-4] * 10), make_impl("cached", [5e-6] * 10),
             make_impl("skipped_work", [0.5e-6] * 10)]
    peaks = {n: ImplPeaks(cpu, cpu) for n in ("baseline", "cached", "skipped_work")}
    out = {r.name: r.status for r in score_impls(mem_cost, impls, peaks, "baseline", "cpu")}
    assert out == {"baseline": "ok", "cached": "ok", "skipped_work": "invalid"}


def test_failed_results_pass_through_unscored():
    impls = [make_impl("baseline", [3e-3] * 10), make_impl("broken", [], status="crashed")]
    peaks = {n: ImplPeaks(SHEET, SHEET) for n in ("baseline", "broken")}
    out = {r.name: r for r in score_impls(COST, impls, peaks, "baseline", "cuda")}
    assert out["broken"].status == "crashed" and out["broken"].score is None


def test_a_starved_cpu_measurement_does_not_convict_an_honest_time():
    """On a loaded CI machine the CPU peaks were measured while other processes held the cores: a copy
    rate ~50x too low raised the floor to 17 us, above an honest LayerNorm's 16.5 us (INVALID, exit 4).
    The floor takes no rate below CPU_FLOOR_FLOPS and CPU_LEAST_BANDWIDTH."""
    starved = Peaks(tensor_flops=None, vector_flops=8.6e8, bandwidth=1.5e8, source="measured")
    ln = Cost("float32", 0.0, 147456.0, fused_bytes=264192.0, unfused_bytes=329728.0)  # tokens 64, hidden 256
    assert time_floor(ln, starved, "cpu") < 3e-6  # 264192 B at 1 GB/s, /100; before: 147456 / 8.6e8 / 10 = 17 us
    impls = [make_impl("baseline", [1.65e-5] * 10), make_impl("skipped_work", [0.5e-6] * 10)]
    peaks = {n: ImplPeaks(starved, starved) for n in ("baseline", "skipped_work")}
    out = {r.name: r.status for r in score_impls(ln, impls, peaks, "baseline", "cpu")}
    assert out == {"baseline": "ok", "skipped_work": "invalid"}
    # an unstarved measurement keeps its own, stricter floor
    fast = Peaks(tensor_flops=None, vector_flops=2e11, bandwidth=8e9, source="measured")
    assert time_floor(ln, fast, "cpu") == max(147456.0 / 2e11 / 10, 264192.0 / 8e9 / 100)


def test_a_starved_cpu_measurement_does_not_convict_an_honest_matmul_on_one_core():
    """A loaded CI host measured its CPU peak at 8.9 GFLOP/s while one honest thread ran o_proj's float32
    matmul at 112 GFLOP/s (1.31 ms): a floor that took 10 GFLOP/s at least, at a margin of 10, sat at
    1.47 ms and called it INVALID (exit 4). The floor's compute rate is at least one core's."""
    starved = Peaks(tensor_flops=None, vector_flops=8.9e9, bandwidth=1.5e8, source="measured")
    flops = 1.31e-3 * 112e9
    matmul = Cost("float32", 0.0, flops, fused_bytes=4.0e5, unfused_bytes=6.0e5)
    impls = [make_impl("baseline", [1.34e-3] * 10), make_impl("fused", [1.31e-3] * 10),
             make_impl("skipped_work", [2e-6] * 10)]
    peaks = {n: ImplPeaks(starved, starved) for n in ("baseline", "fused", "skipped_work")}
    out = {r.name: r.status for r in score_impls(matmul, impls, peaks, "baseline", "cpu")}
    assert out == {"baseline": "ok", "fused": "ok", "skipped_work": "invalid"}


def test_a_starved_cpu_measurement_is_named():
    from solbench.device.detect import starved_cpu_peaks

    assert starved_cpu_peaks({"vector_fp32_flops": 2e11, "bandwidth": 8e9}) == ()
    (warning,) = starved_cpu_peaks({"vector_fp32_flops": 2e11, "bandwidth": 1.5e8})
    assert "0.15 GB/s" in warning and "other processes held the cores" in warning


def test_an_invalid_baseline_is_no_baseline():
    """A baseline whose median lies below the floor is reported INVALID (its timing is wrong): the
    others get no speedup or S against it, as against a baseline that failed, and not S = 0 and a
    speedup of 1/3 against an impossible 1 ms (T_SOL 2 ms)."""
    impls = [make_impl("baseline", [1e-3] * 10), make_impl("good", [3e-3] * 10)]
    peaks = {n: ImplPeaks(SHEET, SHEET) for n in ("baseline", "good")}
    out = {r.name: r for r in score_impls(COST, impls, peaks, "baseline", "cuda")}
    assert out["baseline"].status == "invalid"
    good = out["good"].score
    assert out["good"].status == "ok" and good.sol == 2e-3 / 3e-3
    assert good.speedup is None and good.s_score is None
