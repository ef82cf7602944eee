"""The gate looked at again after rounds are added: which cases still need rounds. Pure.

``ab`` (and any loop that measures both sides in rounds) asks after its first rounds which
``case_id/impl`` keys are still undecided, measures more rounds of those only (``ab``:
ROUNDS_A_LOOK of them), and asks again, up to a cap. ``Looks`` keeps the verdicts of the keys
decided at earlier looks (their data no longer change; ``gate.merge_looks``) and splits the error
rates over the looks the cap allows (``gate(looks=K)``; analysis.sequential proves the rates in
simulation)::

    looks = Looks(K, threshold=..., alpha=...)     # K = looks_for(first rounds, max_rounds)
    after each look's rounds: keys = looks.undecided(base, cur)   # [] -> stop
    at the end:               result = looks.result(base, cur)
"""

from __future__ import annotations

from typing import Any

from solbench.analysis.gate import ROUNDS_A_LOOK as ROUNDS_A_LOOK  # re-exported: the looks' schedule
from solbench.analysis.gate import UNCONFIRMED_VERDICTS as UNCONFIRMED_VERDICTS
from solbench.analysis.gate import GateResult, Side, gate, merge_looks, unconfirmed
from solbench.analysis.gate import looks_for as looks_for
from solbench.results.model import RunResult

__all__ = ["ROUNDS_A_LOOK", "UNCONFIRMED_VERDICTS", "Looks", "looks_for"]

# UNCONFIRMED_VERDICTS (gate.unconfirmed): what ``ab`` reports INCONCLUSIVE where both sides of a key are
# one process each: a verdict on time there is no verdict, so the looks measure such a key again as an
# undecided one.


class Looks:
    """The gate over a growing pair of runs, one look per round, verdicts kept once decided."""

    def __init__(self, looks: int, **gate_kwargs: Any) -> None:
        self.looks = looks
        self.gate_kwargs = gate_kwargs
        self.last: GateResult | None = None
        self.measured: list[str] = []  # keys named at the last look (measured again since)
        self.count = 0  # looks taken

    def result(self, base: Side, cur: RunResult) -> GateResult:
        """The gate now, with verdicts decided at earlier looks kept for keys not measured since."""
        new = gate(base, cur, looks=self.looks, **self.gate_kwargs)
        merged = new if self.last is None else merge_looks(self.last, new, self.measured)
        self.last = merged
        self.count += 1
        return merged

    def undecided(self, base: Side, cur: RunResult) -> list[str]:
        """Keys still INCONCLUSIVE at this look, or decided between one process a side (which the
        verdict reports INCONCLUSIVE: ``UNCONFIRMED_VERDICTS``): the ones to measure again; [] when all
        are decided."""
        keys = [v.key for v in unconfirmed(self.result(base, cur), verdicts=UNCONFIRMED_VERDICTS).undecided]
        self.measured = keys
        return keys
