"""Every ```python block of docs/api.md and README.md runs as written, as a plain script.

Each block is saved as its own script in a temporary folder that holds the checkout's
``workloads/``, ``examples/``, ``tests/data/`` and ``results/h200/`` (what a fresh clone has), and
run with this checkout's solbench first on the import path. A block with a ``# needs X`` comment
is skipped where X is missing (``a CUDA GPU``, ``ncu`` or a Python module). None of the scripts
has an ``if __name__ == "__main__":`` guard: the worker processes must not import the script again.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("docs/api.md", "README.md")
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
