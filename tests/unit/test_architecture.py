"""Layering rules: the pure core imports no device, YAML or rendering libraries."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "solbench"
PURE = ["solbench.analysis.cost", "solbench.analysis.sol", "solbench.analysis.stats",
        "solbench.analysis.hwspec", "solbench.analysis.significance", "solbench.compare",
        "solbench.gate", "solbench.gate_threshold", "solbench.workload.expr", "solbench.workload.cases",
        "solbench.measure.loop", "solbench.measure.criteria", "solbench.results.model",
        "solbench.analysis.scoring", "solbench.pooling", "solbench.workload.ops", "solbench.results.codec",
        "solbench.exitcodes", "solbench.tune_space", "solbench.profile_ncu", "solbench.analysis.rounds"]
HEAVY = ["torch", "cupy", "yaml", "rich", "pynvml"]


@pytest.mark.parametrize("module", PURE)
def test_pure_modules_import_nothing_heavy(module):
    code = (f"import sys, {module}; "
            f"bad = [m for m in {HEAVY!r} if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=PKG.parent)
    assert out.stdout.strip() == "", f"{module} pulls in {out.stdout.strip()}"


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_only_the_nvml_module_imports_pynvml():
    users = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py") if "pynvml" in _imports(p)}
    assert users <= {"device/nvml.py"}


def test_only_the_ray_executor_imports_ray():
    users = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py") if "ray" in _imports(p)}
    assert users <= {"measure/ray_exec.py"}


def test_only_config_imports_yaml():
    users = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py") if "yaml" in _imports(p)}
    assert users and all(u.startswith("config/") for u in users)


def test_reporters_neither_print_nor_open_files():
    for path in (PKG / "report").glob("*.py"):
        tree = ast.parse(path.read_text())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"print", "open"}, path.name


def test_cli_does_not_reach_into_device_or_measure():
    for name in ("cli.py", "cli_ab.py", "cli_compare.py"):
        mods = _imports(PKG / name)
        assert not any(m.startswith(("solbench.device", "solbench.measure")) for m in mods), name
