"""Suite problems at the edges of their formats (our own small files in tmp_path): what KernelBench
and SOL-ExecBench accept runs as it does there, and what they refuse is one line naming the file."""

import json

import pytest
import torch

from solbench.measure.runner import build_launches, draw_inputs
from solbench.suites import load
from solbench.suites.trace import probe
from solbench.workload.cases import expand

KB_TWO_INPUTS = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, {name}):
        return x * 2 + {name}


size = 8


def get_inputs():
    return [torch.randn(size, size), torch.randn(size, size)]


def get_init_inputs():
    return []
'''


def _first_case(spec):
    [case, *_] = expand(spec, "cpu")
    return probe(spec, case, None)[0]


@pytest.mark.parametrize("name", ["problem", "order", "cls", "solution", "compile"])
def test_a_forward_parameter_named_as_the_runtimes_own_runs(tmp_path, name):
    """forward's inputs are passed by name beside the problem file, the input order, the class and
    solution to build and whether to compile: an input named ``cls`` (or ``problem``, ...) took their
    place, and the baseline failed at set-up (or the import with KeyError: 'problem')."""
    path = tmp_path / f"uses_{name}.py"
    path.write_text(KB_TWO_INPUTS.format(name=name))
    [(spec, _)] = load(path)
    case = _first_case(spec)
    inputs = draw_inputs(spec, case, "cpu", None, seed=1)
    first, second = inputs.values()
    [launch] = build_launches(spec.implementations["baseline"], case, [inputs], None)
    torch.testing.assert_close(launch(), first * 2 + second)


def _sol(tmp_path, inputs, reference, lines, **extra):
    """A SOL-ExecBench problem folder: one var axis ``batch``, the given inputs and reference."""
    folder = tmp_path / "problem"
    folder.mkdir()
    definition = {"name": "problem", "axes": {"batch": {"type": "var"}}, "inputs": inputs,
                  "outputs": {"y": {"shape": ["batch", "64"], "dtype": "float32"}},
                  "reference": reference, **extra}
    (folder / "definition.json").write_text(json.dumps(definition))
    (folder / "workload.jsonl").write_text("".join(json.dumps({"uuid": str(i), **line}) + "\n"
                                                   for i, line in enumerate(lines)))
    return folder


def test_a_shape_with_a_literal_size_runs(tmp_path):
    """SOL-ExecBench reads a shape entry of digits (``"64"``) as that size; it was looked up as an axis
    name: the import wrote the workload (without a CPU profile) and every run of it failed, KeyError: '64'."""
    folder = _sol(tmp_path, {"x": {"shape": ["batch", "64"], "dtype": "float32"}},
                  "def run(x):\n    return x * 2\n", [{"axes": {"batch": 8}, "inputs": {"x": {"type": "random"}}}])
    [(spec, _)] = load(folder)
    case = _first_case(spec)
    assert [t.shape for t in case.inputs + case.outputs] == [(8, 64), (8, 64)]
    assert draw_inputs(spec, case, "cpu", None, seed=1)["x"].shape == (8, 64)
