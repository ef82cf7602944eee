"""solbench.execute.early: the run's fork server started before the command imports torch, with the
preloads the workload files call for, and only where they say."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from solbench.execute import early

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = str(ROOT / "workloads")
COMPILED = str(ROOT / "tests" / "data" / "compiled.yaml")


def test_attention_needs_no_compiler_and_libraries_only_on_a_gpu():
    assert early.preloads([f"{WORKLOADS}/attn.yaml"], device="cpu") == (False, False)
    assert early.preloads([f"{WORKLOADS}/attn.yaml"], device="cuda:1") == (True, False)


def test_a_compiled_implementation_preloads_the_compiler_unless_filtered_out():
    files = [f"{WORKLOADS}/attn.yaml", f"{WORKLOADS}/bert.yaml"]
    assert early.preloads(files, device="cpu") == (False, True)
    assert early.preloads(files, device="cpu", workloads=["residual_layernorm"]) == (False, False)
    assert early.preloads(files, device="cpu", workloads=["bert_layer"], impls=["fused"]) == (False, False)
    assert early.preloads(files, device="cpu", workloads=["bert_layer"], impls=["compiled"]) == (False, True)


def test_a_build_requirement_counts_as_compiling(tmp_path):
    text = Path(COMPILED).read_text()
    assert early.preloads([COMPILED], device="cpu") == (False, True)
    path = tmp_path / "built.yaml"
    path.write_text(text.replace("requires: [compile]", "requires: [build]").replace("requires: [inductor]", "requires: [build]"))
    assert "build" in path.read_text()
    assert early.preloads([str(path)], device="cpu") == (False, True)
    path.write_text(text.replace("requires: [compile]", "requires: []").replace("requires: [inductor]", "requires: []"))
    assert early.preloads([str(path)], device="cpu") == (False, False)


@pytest.mark.parametrize("text", ["workloads: [1, 2]\n", "not: workloads\n", "workloads: {a: 1}\n", "a: [\n",
                                  "workloads:\n  - name: w\n    implementations: [1]\n"])
def test_files_that_do_not_say_give_no_early_start(tmp_path, text):
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    assert early.preloads([str(path)], device="cpu") is None


def test_folders_and_python_problems_give_no_early_start(tmp_path):
    (tmp_path / "level1").mkdir()
    (tmp_path / "problem.py").write_text("x = 1\n")
    assert early.preloads([str(tmp_path / "level1")], device="cpu") is None
    assert early.preloads([str(tmp_path / "problem.py")], device="cpu") is None
    assert early.preloads([f"{WORKLOADS}/attn.yaml", str(tmp_path / "missing.yaml")], device="cpu") is None


def test_auto_guesses_a_gpu_from_the_device_node_and_visible_devices(monkeypatch, tmp_path):
    node = tmp_path / "nvidiactl"
    monkeypatch.setattr(early, "NVIDIA_NODE", str(node))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert early._may_be_gpu("auto") is False
    node.write_text("")
    assert early._may_be_gpu("auto") is True
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert early._may_be_gpu("auto") is False
    assert early._may_be_gpu("cpu") is False


PROBE = """
import json, sys
from multiprocessing import forkserver
from solbench.execute import early
from solbench.measure import pool
from solbench.plan.options import RunOptions
started = early.start_for_run(sys.argv[1:], RunOptions(), device="cpu")
pid = forkserver._forkserver._forkserver_pid
again = pool.start_fork_server()
out = {"started": started, "server": pid is not None, "again": again, "torch_here": "torch" in sys.modules,
       "compiler": pool.COMPILER_PRELOAD in pool._PRELOAD, "libraries": pool.LIBRARY_PRELOAD in pool._PRELOAD}
if started:  # the server it started forks a worker that runs a task's imports
    p = pool.Pool("cpu", None)
    p.prestart([("w", "a")])
    p.close()
print(json.dumps(out))
"""


def _probe(*files):
    done = subprocess.run([sys.executable, "-c", PROBE, *files], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_server_starts_before_this_process_imports_torch_with_what_the_files_need():
    out = _probe(f"{WORKLOADS}/bert.yaml")
    assert out == {"started": True, "server": True, "again": False, "torch_here": False,
                   "compiler": True, "libraries": False}


def test_no_early_start_where_the_files_do_not_say(tmp_path):
    (tmp_path / "level1").mkdir()
    out = _probe(str(tmp_path / "level1"))
    assert out["started"] is False and out["server"] is False


@pytest.mark.parametrize("options", [{"in_process": True}, {"devices": "all"}, {"executor": "ray"},
                                     {"solutions": ("model_new.py",)}])
def test_runs_without_a_local_fork_server_start_none_early(monkeypatch, options):
    from solbench.measure import pool
    from solbench.plan.options import RunOptions

    monkeypatch.setattr(pool, "start_fork_server", lambda **kw: pytest.fail(f"started with {options}"))
    assert early.start_for_run([f"{WORKLOADS}/attn.yaml"], RunOptions(**options), device="cpu") is False


def test_the_run_command_module_and_the_api_do_not_import_torch():
    code = "import sys, solbench.cli.run, solbench.api; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
