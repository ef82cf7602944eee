"""solbench.analysis.tdist gives what scipy.stats.t and scipy.stats.norm give, without importing
scipy.stats (which the analysis modules no longer do at import)."""

import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

from solbench.analysis import tdist

DFS = [1, 2, 2.5, 4, 7.3, 30, 1e6, np.inf]


@pytest.mark.parametrize("df", DFS)
def test_t_quantiles_and_tails_match_scipy_stats(df):
    q = np.array([0.0005, 0.025, 0.3, 0.5, 0.8, 0.975, 0.9995])
    np.testing.assert_allclose(tdist.t_ppf(q, df), stats.t.ppf(q, df), rtol=1e-10, atol=1e-12)
    x = np.array([-40.0, -3.0, -0.2, 0.0, 0.7, 4.3, 40.0])
    np.testing.assert_allclose(tdist.t_sf(x, df), stats.t.sf(x, df), rtol=1e-9, atol=1e-300)
    np.testing.assert_allclose(tdist.t_cdf(x, df), stats.t.cdf(x, df), rtol=1e-9, atol=1e-300)


def test_far_tails_keep_their_relative_precision():
    # an upper tail taken as 1 - cdf would read 0 here; sf must keep the small number
    assert tdist.t_sf(60.0, 10) == pytest.approx(stats.t.sf(60.0, 10), rel=1e-9)
    assert 0.0 < tdist.t_sf(60.0, 10) < 1e-12


def test_arrays_broadcast_over_degrees_of_freedom():
    df = np.array([2.0, 5.0, 11.0])
    np.testing.assert_allclose(tdist.t_ppf(0.975, df), stats.t.ppf(0.975, df), rtol=1e-12)
    np.testing.assert_allclose(tdist.norm_ppf(np.array([0.1, 0.5, 0.975])),
                               stats.norm.ppf([0.1, 0.5, 0.975]), rtol=1e-12, atol=1e-15)


def test_no_degrees_of_freedom_is_not_a_number():
    assert np.isnan(tdist.t_ppf(0.975, 0.0))
    assert np.isnan(tdist.t_ppf(0.975, -1.0))


def test_the_analysis_modules_do_not_import_scipy_stats():
    code = ("import sys; import solbench.analysis.gate, solbench.analysis.compare, solbench.analysis.adaptive,"
            " solbench.analysis.allocation, solbench.analysis.sequential, solbench.analysis.rounds;"
            " print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
