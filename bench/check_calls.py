"""How many times the CUPTI side-stream check (guards.traced_call) calls an implementation, per check.

    PYTHONPATH=. python3 bench/check_calls.py [queries-on]

One process, one GPU: the o_proj decode call (torch.addmm at 16 tokens, hidden 4096, bf16), checked
six times in a row with the tracer as it is, or with the records of state queries left on
(``queries-on``: cupti.QUERIES not turned off). A check calls once, again behind a longer spin when the spin ran dry,
and again when CUPTI, just turned on, delivered nothing. Prints the calls per check.
"""

from __future__ import annotations

import sys

import torch

from solbench.device import cupti
from solbench.measure.guards import traced_call


def main() -> None:
    x = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16) / 64
    r = torch.randn(16, 4096, device="cuda", dtype=torch.bfloat16)
    trace = cupti.tracer()
    count = [0]

    def call():
        count[0] += 1
        return torch.addmm(r, x, w.T)

    label = "queries on" if sys.argv[1:] == ["queries-on"] else "queries off (as the tracer is)"
    if label == "queries on":
        trace._queries = []
    per = []
    for _ in range(6):
        count[0] = 0
        _, problem = traced_call(call, trace)
        per.append((count[0], problem))
    print(f"{label}: calls per check {[n for n, _ in per]}, problems {[p for _, p in per if p]}")


if __name__ == "__main__":
    main()
