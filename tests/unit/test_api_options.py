"""docs/api.md: bad input raises ConfigError. RunOptions and TuneOptions took counts the CLI refuses."""

import pytest

import solbench
from solbench.tools import tune as tuning


@pytest.mark.parametrize("knobs", [
    dict(input_sets=0),  # each worker failed with IndexError: the implementation's "error", exit 4
    dict(min_samples=0, max_samples=0),  # ValueError: bad sample bounds [0, 0]
    dict(warmup=-1),
])
def test_run_options_refuse_counts_no_run_can_honour(knobs):
    with pytest.raises(solbench.ConfigError, match="must be an integer at least"):
        solbench.RunOptions(**knobs)


@pytest.mark.parametrize("knobs", [
    dict(confirm_rounds=0),  # tuned every configuration, then ValueError: no samples
    dict(input_sets=0),
    dict(min_samples=0, max_samples=0),
    dict(max_configs=-1),  # every configuration but the last, silently
    dict(max_configs=0),  # none measured: "no winner"
    dict(patience=0),  # no patience at all
    dict(patience=-2),  # stopped after the first configuration
    dict(max_configs=2.5),
])
def test_tune_options_refuse_counts_no_tuning_can_honour(knobs):
    with pytest.raises(solbench.ConfigError, match="must be an integer at least"):
        tuning.TuneOptions(**knobs)



@pytest.mark.parametrize(("options", "field", "value", "least"), [
    (solbench.RunOptions, "warmup", -1, 0), (tuning.TuneOptions, "warmup", -1, 0),
    (tuning.TuneOptions, "input_sets", 0, 1),
])
def test_a_bad_count_no_command_line_option_sets_names_the_field_not_a_flag(options, field, value, least):
    """The messages named ``--warmup`` (no command takes it) and, for tuning, ``--input-sets`` (only
    ``run`` and ``ab`` take it): only the Python API sets these."""
    with pytest.raises(solbench.ConfigError) as err:
        options(**{field: value})
    assert str(err.value) == f"{options.__name__}.{field} must be an integer at least {least}, got {value}"
