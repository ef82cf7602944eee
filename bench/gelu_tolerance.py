"""Can bert_layer's bf16 tolerance (relative L2 1%) tell the exact GELU from its approximations? The layer in
bf16 eager (CPU) against the fp64 reference (bert_layer_baseline on fp64 inputs drawn as workloads/bert.yaml
draws them), with GELU exact, in tanh form, and as x * sigmoid(1.702 x); the approximations also in fp64, to
show their own error.

    python bench/gelu_tolerance.py [BATCH [SEQ]]     # default 4 512 (hidden 768, 12 heads, ffn 3072)
"""

import sys

import torch
import torch.nn.functional as F

import solbench.impls.bert as bert


def main(batch: int = 4, seq: int = 512) -> None:
    torch.manual_seed(0)
    h, heads, ffn = 768, 12, 3072

    def rnd(*shape, std=1.0, mean=0.0):
        return torch.randn(*shape, dtype=torch.float64) * std + mean

    args = [rnd(batch, seq, h), rnd(3 * h, h, std=h ** -0.5), rnd(3 * h, std=0.1), rnd(h, h, std=h ** -0.5),
            rnd(h, std=0.1), rnd(h, std=0.1, mean=1.0), rnd(h, std=0.1), rnd(ffn, h, std=h ** -0.5),
            rnd(ffn, std=0.1), rnd(h, ffn, std=ffn ** -0.5), rnd(h, std=0.1), rnd(h, std=0.1, mean=1.0),
            rnd(h, std=0.1)]
    ref = bert.bert_layer_baseline(*args, heads=heads)
    low = [a.bfloat16() for a in args]

    def err(y):
        d = y.double() - ref
        return f"relative L2 {(d.norm() / ref.norm()).item():.4f}, max abs {d.abs().max().item():.4f}"

    exact = F.gelu
    forms = {"exact (erf)": exact, "tanh": lambda t, approximate="none": exact(t, approximate="tanh"),
             "x*sigmoid(1.702x)": lambda t, approximate="none": t * torch.sigmoid(1.702 * t)}
    try:
        for name, gelu in forms.items():
            bert.F.gelu = gelu
            print(f"{name:18s} bf16: {err(bert.bert_layer_baseline(*low, heads=heads))}; "
                  f"fp64: {err(bert.bert_layer_baseline(*args, heads=heads))}")
    finally:
        bert.F.gelu = exact
    print(f"batch {batch}, seq {seq}, CPU, torch {torch.__version__}; tolerance in workloads/bert.yaml: rel_l2 0.01")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
