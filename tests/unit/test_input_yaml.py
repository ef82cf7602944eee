"""Reading YAML files: duplicate keys, encodings, nesting and alias bombs are one-line ConfigErrors."""

import pytest
import yaml

from solbench.config import yamlio
from solbench.config.hwspecs import load_spec_file
from solbench.config.workloads import load_workload_file
from solbench.errors import ConfigError

GOOD = """\
workloads:
  - name: scale
    parameters: {n: [8, 16]}
    dtypes: [float32]
    inputs:
      x: {shape: [n, 4]}
    outputs:
      y: {shape: [n, 4]}
    ops: [{op: mul, numel: n * 4, inputs: 1}]
    reference: tests.unit.helpers:double
    implementations:
      baseline: tests.unit.helpers:double
"""


def write(tmp_path, text, name="w.yaml"):
    path = tmp_path / name
    path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


def error_of(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_workload_file(path)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_good_file_loads(tmp_path):
    (spec,) = load_workload_file(write(tmp_path, GOOD))
    assert spec.name == "scale" and spec.ops[0].numel == "n * 4"


def test_duplicate_key_names_the_key_and_both_lines(tmp_path):
    text = GOOD.replace("    dtypes: [float32]\n", "    dtypes: [float32]\n    dtypes: [float64]\n")
    message = error_of(write(tmp_path, text))
    assert message == f"{tmp_path / 'w.yaml'}:5: invalid YAML: duplicate key 'dtypes' (first at line 4)"


@pytest.mark.parametrize("key, reads", [("on", "a boolean"), ("no", "a boolean"), ("null", "None")])
def test_a_key_yaml_reads_as_a_boolean_or_none_is_refused_by_its_name(tmp_path, key, reads):
    """An implementation named ``on`` (YAML 1.1: True) was refused as "implementations.1: Input should be a
    valid string (got True)", naming neither the key nor why; quoted, it is a name."""
    text = GOOD.replace("      baseline: tests.unit.helpers:double\n",
                        f"      baseline: tests.unit.helpers:double\n      {key}: tests.unit.helpers:double\n")
    assert error_of(write(tmp_path, text)) == (f"{tmp_path / 'w.yaml'}:13: invalid YAML: the key '{key}' reads as "
                                               f"{reads} in YAML, not as a name: quote it ('{key}')")
    quoted = text.replace(f"      {key}:", f"      '{key}':")
    (spec,) = load_workload_file(write(tmp_path, quoted))
    assert key in spec.implementations


def test_duplicate_key_in_a_flow_mapping(tmp_path):
    text = GOOD.replace("x: {shape: [n, 4]}", "x: {shape: [n, 4], shape: [n, 8]}")
    assert "duplicate key 'shape'" in error_of(write(tmp_path, text))


def test_merge_keys_may_be_overridden(tmp_path):
    text = GOOD.replace("workloads:\n", "x-base: &base {shape: [n, 4], std: 2.0}\nworkloads:\n").replace(
        "x: {shape: [n, 4]}", "x: {<<: *base, std: 0.5}")
    (spec,) = load_workload_file(write(tmp_path, text))
    assert spec.inputs["x"].std == 0.5 and spec.inputs["x"].shape == ["n", 4]


def test_an_error_in_a_key_that_overrides_a_merge_names_its_own_line(tmp_path):
    """The merged pairs come first in the constructed node: the error named the anchor's line, where
    the value is valid, not the line of the overriding key that holds the bad value."""
    text = GOOD.replace("  - name: scale", "  - &w\n    name: scale") + "  - <<: *w\n    name: other\n    dtypes: [float33]\n"
    lines = text.splitlines()
    bad = next(i for i, line in enumerate(lines, 1) if "float33" in line)
    message = error_of(write(tmp_path, text))
    assert message.startswith(f"{tmp_path / 'w.yaml'}:{bad}: workloads.1.dtypes.0: "), message


def test_not_utf8_names_the_line(tmp_path):
    raw = GOOD.encode().replace(b"name: scale", b"name: sc\xffle")
    offset = raw.index(b"\xff")
    assert error_of(write(tmp_path, raw)).endswith(f"w.yaml:2: not UTF-8 text (byte 0xff at offset {offset})")


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x1b"])
def test_a_control_character_names_its_line(tmp_path, char):
    """PyYAML's reader error has no mark, only a position: the message named the file alone."""
    text = GOOD.replace("name: scale", f"name: sc{char}ale")
    message = error_of(write(tmp_path, text))
    assert message.startswith(f"{tmp_path / 'w.yaml'}:2: invalid YAML: unacceptable character"), message


def test_a_byte_order_mark_is_accepted(tmp_path):
    (spec,) = load_workload_file(write(tmp_path, b"\xef\xbb\xbf" + GOOD.encode()))
    assert spec.name == "scale"


@pytest.mark.parametrize("text", [
    "workloads: " + "[" * 50_000 + "]" * 50_000,
    "workloads: " + "{a: " * 50_000 + "1" + "}" * 50_000,
    "workloads:\n" + "".join("  " * i + "- \n" for i in range(1, 200)),
])
def test_nesting_bombs(tmp_path, text):
    assert "nested more than 40 levels deep" in error_of(write(tmp_path, text))


def test_depth_through_aliases_counts(tmp_path):
    deep = "[" * 30 + "1" + "]" * 30
    text = f"a: &a {deep}\nb: &b [[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]\n"
    assert "nested more than 40 levels deep once aliases are expanded" in error_of(write(tmp_path, text))


def billion_laughs(inside_ops: bool) -> str:
    levels = ["x-l0: &l0 {op: add, numel: 1}"]
    for i in range(1, 9):
        levels.append(f"x-l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]")
    head = "\n".join(levels) + "\n"
    if inside_ops:
        return head + GOOD.replace("ops: [{op: mul, numel: n * 4, inputs: 1}]", "ops: *l8")
    return head + "workloads: *l8\n"


@pytest.mark.parametrize("inside_ops", [True, False])
def test_alias_bombs(tmp_path, inside_ops):
    message = error_of(write(tmp_path, billion_laughs(inside_ops)))
    assert f"expands to more than {yamlio.MAX_NODES} values (alias bomb?)" in message


def test_recursive_alias(tmp_path):
    assert "recursive alias" in error_of(write(tmp_path, "workloads: &a [*a]\n"))


def test_shared_anchors_below_the_limit_still_load(tmp_path):
    text = GOOD.replace("workloads:\n", "x-shape: &shape [n, 4]\nworkloads:\n").replace(
        "x: {shape: [n, 4]}", "x: {shape: *shape}").replace("y: {shape: [n, 4]}", "y: {shape: *shape}")
    (spec,) = load_workload_file(write(tmp_path, text))
    assert spec.inputs["x"].shape == spec.outputs["y"].shape == ["n", 4]


@pytest.mark.parametrize("value,expected", [
    ("2024-13-45", "invalid YAML value: month must be in 1..12"),
    ("!!float abc", "invalid YAML value: could not convert string to float"),
    ("!!python/object:os.system x", "invalid YAML: could not determine a constructor"),
    ("9" * 5000, "invalid YAML value: Exceeds the limit (4300 digits)"),
    ("*nowhere", "invalid YAML: found undefined alias 'nowhere'"),
])
def test_bad_values_are_one_line(tmp_path, value, expected):
    message = error_of(write(tmp_path, GOOD.replace("name: scale", f"name: {value}")))
    assert message.startswith(f"{tmp_path / 'w.yaml'}:2: ") and expected in message


def test_two_documents_are_refused(tmp_path):
    assert "invalid YAML" in error_of(write(tmp_path, GOOD + "---\n" + GOOD))


def test_oversized_file_is_refused_without_parsing(tmp_path, monkeypatch):
    monkeypatch.setattr(yamlio, "MAX_BYTES", 100)
    assert "larger than the 100 bytes a YAML file may have" in error_of(write(tmp_path, GOOD))


def test_device_files_are_not_read_whole():
    assert "larger than the" in error_of(__import__("pathlib").Path("/dev/zero"))


def test_directory_is_refused(tmp_path):
    assert error_of(tmp_path).endswith("is a directory, not a YAML file")


def test_the_parser_is_never_handed_a_cyclic_tree(tmp_path, monkeypatch):
    calls = []
    original = yaml.SafeLoader.construct_document

    def spy(self, node):
        calls.append(node)
        return original(self, node)

    monkeypatch.setattr(yaml.SafeLoader, "construct_document", spy)
    error_of(write(tmp_path, "workloads: &a [*a]\n"))
    assert calls == []  # refused before construction


def test_hardware_spec_files_get_the_same_checks(tmp_path):
    path = write(tmp_path, "id: x\nid: y\n", "x.yaml")
    with pytest.raises(ConfigError, match=r"x.yaml:2: invalid YAML: duplicate key 'id' \(first at line 1\)"):
        load_spec_file(path)


def test_one_line_helper():
    assert yamlio.one_line("a\n  b\tc") == "a b c"
    assert len(yamlio.one_line("x" * 1000)) == 400


def test_misspelt_spec_field_gets_a_suggestion(tmp_path):
    from pathlib import Path

    source = Path(__file__).resolve().parents[2] / "hardware_specs" / "h200-sxm.yaml"
    text = source.read_text().replace("bandwidth_tbs:", "bandwith_tbs:")
    path = write(tmp_path, text, "h200-sxm.yaml")
    with pytest.raises(ConfigError, match=r"h200-sxm.yaml:\d+: bandwith_tbs: unknown field 'bandwith_tbs' \(did you mean 'bandwidth_tbs'\?\)"):
        load_spec_file(path)
