"""Compare and gate tables: case and implementation apart, no always-empty column, keys never cut."""

from __future__ import annotations

import io

from rich.console import Console

from solbench.analysis.compare import compare_runs
from solbench.analysis.gate import gate
from solbench.report.compare_console import comparison_table, gate_table, short_cases
from tests.unit.factories import make_run

CASES = [f"o_proj[tokens={t},hidden=4096,bfloat16]" for t in (16, 64, 16384)]


def _render(table, width: int = 110) -> str:  # type: ignore[no-untyped-def]
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_short_cases_keep_what_varies_and_say_the_rest_once() -> None:
    short, constant = short_cases(CASES)
    assert [short[c] for c in CASES] == ["tokens=16", "tokens=64", "tokens=16384"]
    assert constant == "o_proj: hidden=4096 bfloat16"
    mixed, constant = short_cases([CASES[0], "qkv_proj[tokens=16,hidden=4096,bfloat16]"])
    assert mixed == {CASES[0]: "o_proj", "qkv_proj[tokens=16,hidden=4096,bfloat16]": "qkv_proj"}
    assert constant == "every case: tokens=16 hidden=4096 bfloat16"
    assert short_cases([CASES[0]]) == ({CASES[0]: CASES[0]}, "")


def _runs():  # type: ignore[no-untyped-def]
    data = {c: {"baseline": [1e-3] * 30, "fused_implementation_with_a_long_name": [8e-4] * 30} for c in CASES}
    return make_run(data), make_run(data)


def test_gate_table_has_case_and_impl_columns_and_no_empty_note() -> None:
    base, cur = _runs()
    t = gate_table(gate(base, cur, threshold=0.05))
    headers = [str(c.header) for c in t.columns]
    assert headers[:2] == ["case", "impl"] and "note" not in headers
    text = _render(t)
    impl_cells = "".join(line.split("│")[2].strip() for line in text.splitlines() if line.startswith("│"))
    assert "…" not in text and impl_cells.count("fused_implementation_with_a_long_name") == 3  # folded, whole
    assert "tokens=16384" in text and "o_proj: hidden=4096 bfloat16" in text


def test_comparison_table_keys_are_never_cut_at_110_columns() -> None:
    base, cur = _runs()
    text = _render(comparison_table(compare_runs(base, cur, label_a="nightly", label_b="head")))
    assert "…" not in text
    for line in text.splitlines():
        assert len(line.rstrip()) <= 110
    assert all(f"tokens={t}" in text for t in (16, 64, 16384))
    assert text.count("│ SAME") == 6  # every row (the caption says "SAME within")
