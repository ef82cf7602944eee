"""Every ```python block of docs/api.md and README.md runs as written, as a plain script.

Each block is saved as its own script in a temporary folder that holds the checkout's
``workloads/``, ``examples/``, ``tests/data/`` and ``results/h200/`` (what a fresh clone has), and
run with this checkout's solbench first on the import path. A block with a ``# needs X`` comment
is skipped where X is missing (``a CUDA GPU``, ``ncu`` or a Python module). None of the scripts
has an ``if __name__ == "__main__":`` guard: the worker processes must not import the script again.

Every ``solbench COMMAND ...`` line the docs show (their ```bash blocks, the CI example, inline spans,
each command's help) uses only options that command has, and every option is named in the docs.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/api.md", "README.md")
CI_EXAMPLE = "docs/ci/github-actions-gpu-gate.yml"
SHARED = ("workloads", "examples", "tests/data", "results/h200")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
_NEEDS = re.compile(r"#\s*needs ((?:a CUDA GPU)|[A-Za-z_][\w.]*)")


def _blocks() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for m in _BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            found.append((f"{doc}:{line}", m.group(1)))
    return found


def _missing(code: str) -> list[str]:
    missing = []
    for need in _NEEDS.findall(code):
        if need == "a CUDA GPU":
            ok = torch.cuda.is_available()
        elif need == "ncu":
            ok = shutil.which("ncu") is not None
        else:
            ok = importlib.util.find_spec(need) is not None
        if not ok:
            missing.append(need)
    return missing


def _folder(tmp_path: Path) -> Path:
    for rel in SHARED:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).symlink_to(ROOT / rel, target_is_directory=True)
    return tmp_path


BLOCKS = _blocks()


def test_the_docs_have_examples() -> None:
    assert len([b for b in BLOCKS if b[0].startswith("docs/api.md")]) >= 8
    assert any(b[0].startswith("README.md") for b in BLOCKS)


@pytest.mark.parametrize(("where", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_example_runs_as_a_script(where: str, code: str, tmp_path: Path) -> None:
    missing = _missing(code)
    if missing:
        pytest.skip(f"{where} needs {', '.join(missing)}")
    folder = _folder(tmp_path)
    script = folder / "example.py"
    script.write_text(code)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(script)], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, f"{where} failed:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, f"{where}:\n{proc.stderr[-3000:]}"


def test_every_name_in_the_api_table_is_exported_where_the_table_says():
    """docs/api.md's "Where the functions live": each name imports from its module, from ``solbench``
    and from ``solbench.api`` (``plan`` from ``solbench.api`` only: ``solbench.plan`` is the package)."""
    import solbench
    import solbench.api

    text = (ROOT / "docs/api.md").read_text()
    table = text[text.index("## Where the functions live"):text.index("## Running workloads")]
    rows = re.findall(r"^\| (`.+?`) \| `(solbench[\w.]*)` \|", table, re.M)
    assert len(rows) >= 12
    from solbench._api_names import PUBLIC

    assert {n for names, _ in rows for n in re.findall(r"`(\w+)`", names)} - {"plan"} == PUBLIC
    for names, module in rows:
        for name in re.findall(r"`(\w+)`", names):
            where = importlib.import_module(module)
            assert getattr(solbench.api, name) is getattr(where, name), name
            if name != "plan":
                assert getattr(solbench, name) is getattr(where, name), name
                assert name in solbench.__all__ and name in solbench.api.__all__, name


def _command_lines() -> list[tuple[str, str]]:
    """Every ``solbench COMMAND ...`` the docs show: lines of the ```bash blocks of README.md and
    docs/api.md, the CI example's steps, inline `solbench ...` spans, and the examples in each
    command's own help. Shell redirections, pipes and comments are cut off."""
    from solbench.cli.main import _COMMANDS, main

    sources = []
    for doc in (*DOCS, CI_EXAMPLE):
        text = (ROOT / doc).read_text(encoding="utf-8")
        blocks = [text] if doc == CI_EXAMPLE else re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
        sources += [(doc, block) for block in blocks]
        sources += [(doc, "solbench " + " ".join(span.split())) for span in re.findall(r"`solbench ([a-z][^`]*)`", text)]
    sources += [(f"solbench {name} --help", main.commands[name].help or "") for name in _COMMANDS]
    lines = []
    for where, text in sources:
        for line in text.replace("\\\n", " ").splitlines():
            for part in re.split(r"\s(?:&&|\|\|?|;|2?>)\s|;\s*do\s", line):
                m = re.match(r"\s*(?:-\s*run:\s*)?(?:\S*/)?solbench ([a-z].*)", part)
                if m:
                    lines.append((where, m.group(1)))
    return lines


def test_every_solbench_command_line_in_the_docs_uses_options_its_command_has() -> None:
    """A renamed or removed option, or a choice no longer accepted, must not survive in an example."""
    from solbench.cli.main import _COMMANDS, main

    lines = _command_lines()
    assert len(lines) >= 80 and any(w.endswith(".yml") for w, _ in lines) and any("--help" in w for w, _ in lines)
    wrong = []
    for where, line in lines:
        name, *args = shlex.split(line, comments=True)
        if name not in _COMMANDS:
            wrong.append(f"{where}: `solbench {line}`: no command {name!r}")
            continue
        options = {o: p for p in main.commands[name].params if isinstance(p, click.Option)
                   for o in (*p.opts, *p.secondary_opts)}
        for i, arg in enumerate(args):
            flag, _, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
            if not (flag.startswith("-") and len(flag) > 1) or flag in ("--help", "-h"):
                continue
            option = options.get(flag)
            if option is None:
                wrong.append(f"{where}: `solbench {line}`: {name} has no option {flag}")
            elif isinstance(option.type, click.Choice) and not option.is_flag:
                value = value or (args[i + 1] if i + 1 < len(args) else "")
                if value not in option.type.choices:
                    wrong.append(f"{where}: `solbench {line}`: {flag} {value!r} is not one of {option.type.choices}")
    assert not wrong, "\n".join(wrong)


def test_every_option_of_every_command_is_named_in_the_docs() -> None:
    """README.md or docs/api.md names each option of each command, in its long or its short form
    (each command's --help describes them all)."""
    from solbench.cli.main import _COMMANDS, main

    docs = "".join((ROOT / doc).read_text(encoding="utf-8") for doc in DOCS)

    def named(opt: str) -> bool:
        return re.search(r"(?<![\w-])" + re.escape(opt) + r"(?![\w-])", docs) is not None

    missing = [f"{name} {p.opts}" for name in _COMMANDS for p in main.commands[name].params
               if isinstance(p, click.Option) and not any(map(named, p.opts))]
    assert not missing, f"options no doc names: {missing}"


def test_the_readme_exit_codes_are_the_codes_solbench_exits_with() -> None:
    """README's severity order is ``solbench.exitcodes.SEVERITY``, and its exit-code table of the gate
    lists the gate's codes."""
    from solbench import exitcodes

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    order = re.search(r"Severity, least to most \(`solbench/exitcodes.py`\): ([\d, ]+)", readme)
    assert order is not None and tuple(int(c) for c in order.group(1).split(", ")) == exitcodes.SEVERITY
    table = re.findall(r"^\| (\d+) \| ", readme.split("| exit code | meaning |", 1)[1].split("\n\n", 1)[0], re.M)
    assert [int(c) for c in table] == [exitcodes.OK, exitcodes.REGRESSION, exitcodes.USAGE, exitcodes.INCONCLUSIVE]


def test_the_exit_code_table_says_when_a_failing_case_is_broken_as_the_gate_decides_it() -> None:
    """The table's exit 1 called a failing case BROKEN where it was 'ok in the baseline, or absent there',
    and solbench.exitcodes the same; the gate also calls BROKEN one skipped in the baseline (nothing
    shows it worked there), which neither named."""
    from solbench import exitcodes
    from solbench.analysis.gate import gate
    from tests.unit.factories import make_run

    samples = [1e-3 * (1 + i * 1e-3) for i in range(10)]
    base = make_run({"c": {"x": samples, "y": []}}, statuses={"c/y": "skipped"})
    cur = make_run({"c": {"x": samples, "y": []}}, statuses={"c/y": "error"})
    assert {v.key: v.verdict for v in gate(base, cur).verdicts}["c/y"] == "BROKEN"
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    row = next(line for line in readme.split("| exit code | meaning |", 1)[1].splitlines() if line.startswith("| 1 |"))
    broken = row.split("BROKEN:", 1)[1].split("STILL-BROKEN", 1)[0]
    assert "skipped" in broken, row
    assert "skipped" in exitcodes.__doc__.split("BROKEN:", 1)[1].split("STILL-BROKEN", 1)[0]


def test_the_api_doc_says_when_a_case_of_a_run_over_several_devices_has_no_device() -> None:
    """docs/api.md said ``CaseResult.device`` is None in a one-device run only; a case of a run over several
    devices that no device took (wider than the lanes, or its earlier device has no lane) records None too
    (README "Every GPU: local and Ray"; tests/unit/test_shard.py), and code reading ``case.device.spec_id``
    on the doc's word fails there."""
    api_doc = " ".join((ROOT / "docs" / "api.md").read_text(encoding="utf-8").split())
    said = api_doc.split("each `CaseResult.device` is the `Environment` of the GPU it ran on", 1)[1].split(".", 1)[0]
    assert "skipped" in said or "no device took" in said, said


def test_the_docs_name_every_case_of_a_run_over_several_devices_that_records_no_device() -> None:
    """Since 787054b a multi-rank case where no executor can start a process group (the Ray executor) is
    skipped before any device takes it and records no device (tests/unit/test_shard.py), but docs/api.md
    and README's "Every GPU: local and Ray" named only the case wider than the devices and the one whose
    device has no lane: code reading ``case.device.spec_id`` of a Ray run's multi-rank case on their word
    failed there."""
    api_doc = " ".join((ROOT / "docs" / "api.md").read_text(encoding="utf-8").split())
    said = api_doc.split("each `CaseResult.device` is the `Environment` of the GPU it ran on", 1)[1].split(".", 1)[0]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    told = readme.split("records `device: null`", 1)[0].rsplit("(", 1)[1]
    for text in (said, told):
        assert "process group" in text, text
