"""A newcomer's first hour, as the README tells it, on the CPU in a fresh folder.

From a checkout (workloads/ only, no results/): measure and save two runs, show one, compare
them, gate one against the other with JUnit, compare and gate a run with itself, and write the
HTML report, the roofline and the CSV. Every command runs as the user types it (``python -m
solbench``, a fresh process each), with small budgets. Nothing may surprise: exit codes as the
README says, the files named exist, every command names the run files it read.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMALL = ["--device", "cpu", "-w", "o_proj", "--budget", "0.05", "--min-samples", "5", "--max-samples", "40"]


def _solbench(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run([sys.executable, "-m", "solbench", *args], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=600)


def test_the_readme_walkthrough_from_a_fresh_folder(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    (tmp_path / "workloads").symlink_to(ROOT / "workloads", target_is_directory=True)

    for name in ("nightly", "head"):
        run = _solbench(tmp_path, "run", "workloads/attn.yaml", "--save", name, *SMALL)
        assert run.returncode == 0, run.stderr[-2000:]
        assert "saved results/cpu/" in run.stdout and f"_{name}.json" in run.stdout
    nightly, = (tmp_path / "results" / "cpu").glob("*_nightly.json")
    head, = (tmp_path / "results" / "cpu").glob("*_head.json")

    show = _solbench(tmp_path, "show", "--markdown")
    assert show.returncode == 0 and show.stdout.startswith("### solbench run:")
    assert "read run: results/cpu/" in show.stderr

    cmp = _solbench(tmp_path, "compare", "nightly", "head")
    assert cmp.returncode == 0, cmp.stderr
    assert f"read A (nightly): results/cpu/{nightly.name}" in cmp.stderr
    assert f"read B (head): results/cpu/{head.name}" in cmp.stderr
    assert "geomean speedup of head over nightly" in cmp.stdout

    gate = _solbench(tmp_path, "gate", "--baseline", "nightly", "--current", "head", "--junit", "gate.xml")
    assert gate.returncode in (0, 1, 3), gate.stderr  # two runs on a shared CPU: any verdict, never bad input
    assert f"read baseline: results/cpu/{nightly.name}" in gate.stderr
    suite = ET.parse(tmp_path / "gate.xml").getroot()
    # 2 cases x 3 implementations measured on the CPU; the byte floor is measured too, never gated
    assert len(suite.findall(".//testcase")) == 6

    same = _solbench(tmp_path, "compare", str(head), str(head), "--json")
    assert same.returncode == 0 and {r["verdict"] for r in json.loads(same.stdout)["rows"]} == {"SAME"}
    itself = _solbench(tmp_path, "gate", "--baseline", "head", "--current", "head", "--json")
    assert itself.returncode == 0 and {v["verdict"] for v in json.loads(itself.stdout)["verdicts"]} == {"PASS"}

    report = _solbench(tmp_path, "report", "head", "--html", "r.html", "--png", "roofline.png", "--csv", "r.csv")
    assert report.returncode == 0, report.stderr
    assert (tmp_path / "roofline.png").read_bytes().startswith(b"\x89PNG")
    assert "<h2>Roofline</h2>" in (tmp_path / "r.html").read_text()
    assert (tmp_path / "r.csv").read_text().startswith("run,")
    assert "Traceback" not in "".join(p.stderr for p in (show, cmp, gate, same, itself, report))


def test_ci_runs_the_test_command_the_readme_shows() -> None:
    """CI must call the README's test command as written: the block under "Run the tests"."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("Run the tests", 1)[1].split("```bash\n", 1)[1].split("\n```", 1)[0].strip()
    assert "pytest" in block and "\n" not in block
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert block in ci
