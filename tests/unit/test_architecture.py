"""Layering rules: the pure core imports no device, YAML or rendering libraries."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "solbench"
PURE = ["solbench.analysis.cost", "solbench.analysis.sol", "solbench.analysis.stats",
        "solbench.analysis.hwspec", "solbench.analysis.significance", "solbench.analysis.compare",
        "solbench.analysis.gate", "solbench.analysis.thresholds", "solbench.workload.expr", "solbench.workload.cases",
        "solbench.measure.loop", "solbench.measure.criteria", "solbench.results.model",
        "solbench.analysis.scoring", "solbench.analysis.pooling", "solbench.workload.ops", "solbench.results.codec",
        "solbench.exitcodes", "solbench.workload.tune_space", "solbench.tools.ncu", "solbench.analysis.rounds",
        "solbench.analysis.suite_summary"]
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
    assert users <= {"execute/ray_cluster.py"}


def test_only_config_imports_yaml():
    users = {p.relative_to(PKG).as_posix() for p in PKG.rglob("*.py") if "yaml" in _imports(p)}
    assert users and all(u.startswith("config/") for u in users)


def test_reporters_neither_print_nor_open_files():
    for path in (PKG / "report").glob("*.py"):
        tree = ast.parse(path.read_text())
        calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
        assert not calls & {"print", "open"}, path.name


def test_cli_does_not_reach_into_device_or_measure():
    names = sorted((PKG / "cli").glob("*.py"))
    assert len(names) >= 5
    for path in names:
        mods = _imports(path)
        assert not any(m.startswith(("solbench.device", "solbench.measure", "solbench.execute")) for m in mods), path.name


# -- one direction of flow (README "Layout") ------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, set[str]]:
    """Every solbench module -> the solbench modules it imports (at any depth of the file: a
    function-level import is an arrow too). ``from pkg import sub`` points at ``pkg.sub``."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        arrows: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                arrows |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
                target = ".".join([*base, node.module] if node.module else base) if node.level else node.module
                if not target or target not in modules:
                    continue
                subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules}
                arrows |= subs or {target}
                if len(subs) < len(node.names):
                    arrows.add(target)
        graph[name] = arrows - {name}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_import_graph_has_no_cycles():
    assert _cycles(_import_graph()) == []


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def test_every_import_points_down_the_layers():
    """The layers contract of pyproject.toml (import-linter): no module imports a layer above its own."""
    pytest.importorskip("importlinter")
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports; "
                          "raise SystemExit(lint_imports(config_filename='pyproject.toml', no_cache=True))"],
                         capture_output=True, text=True, cwd=PKG.parent)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "1 kept, 0 broken" in out.stdout


def test_the_package_top_level_holds_at_most_ten_modules():
    loose = sorted(p.name for p in PKG.glob("*.py"))
    assert len(loose) <= 10, loose


def test_a_run_reaches_the_worker_without_reentering_the_api():
    """Below the façade nothing imports solbench.api: executors get what they need as data."""
    graph = _import_graph()
    users = sorted(m for m, arrows in graph.items() if "solbench.api" in arrows)
    assert users and all(u == "solbench" or u.startswith("solbench.cli") for u in users), users
