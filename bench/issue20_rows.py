"""Issue 20's rows from a saved suite run (JSON or .json.gz): o_proj `fp8` and o_proj_fp8w `fused` against
o_proj's bf16 `fused`, bert_layer's fused implementations at seq 512 bf16, residual + LayerNorm at 768 (SOL).

    python3 bench/issue20_rows.py results/h100/issue16/session48/call1/suite.json.gz
"""

import gzip
import json
import sys


def points(path):
    """{(workload, params, dtype, implementation): (median seconds, SOL)} of every point timed ok."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        run = json.load(f)
    return {(c["workload"], tuple(sorted(c["params"].items())), c["dtype"], i["name"]):
            (i["timing"]["median"], (i.get("score") or {}).get("sol"))
            for c in run["cases"] for i in c["impls"] if i["status"] == "ok"}


def median(pts, workload, impl, **params):
    for (w, p, dtype, name), (t, _) in pts.items():
        if (w, dtype, name) == (workload, "bfloat16", impl) and all(dict(p).get(k) == v for k, v in params.items()):
            return t
    return None


def ratio_row(pts, label, workload, impl, tokens):
    a, b = median(pts, workload, impl, tokens=tokens), median(pts, "o_proj", "fused", tokens=tokens)
    if a is None or b is None:
        return f"{label} tokens={tokens}: missing"
    return f"{label} tokens={tokens}: {a / b:.3f} ({a * 1e6:.1f} / {b * 1e6:.1f} us)"


def main(path):
    pts = points(path)
    for tokens in (16384, 2048):
        print(ratio_row(pts, "o_proj fp8 / o_proj fused bf16", "o_proj", "fp8", tokens))
    for tokens in (1, 16, 64):
        print(ratio_row(pts, "o_proj_fp8w fused / o_proj fused bf16", "o_proj_fp8w", "fused", tokens))
    for (w, p, dtype, name), (t, sol) in sorted(pts.items()):
        if w == "bert_layer" and dict(p).get("seq") == 512 and dtype == "bfloat16" and name.startswith("fused"):
            print(f"bert_layer seq 512 bf16 {name}: {t * 1e6:.1f} us")
        if w == "residual_layernorm" and dict(p).get("hidden") == 768 and name == "fused":
            print(f"residual_layernorm 768 {dtype} fused: {t * 1e6:.1f} us, SOL {sol:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
