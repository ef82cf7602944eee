"""Re-derive the H200 profile summaries and the tuning verdicts with the final code, from the raw
captures (ncu CSV, timing samples) of the device session."""
import dataclasses, json, shutil, sys
from pathlib import Path
from rich.console import Console
from solbench.tools import tune as tuning
from solbench.cli.tools import _profile_table, _tune_table
from solbench.config.hwspecs import get_spec
from solbench.tools.ncu import parse_raw_csv, summarize
from solbench.tools.profile import ProfileResult, profile_dict, ridge_point
from solbench.results.model import Environment

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
spec = get_spec("h200-sxm")
out = Console(width=200, record=True, highlight=False)
big = {"o_proj_baseline", "residual_layernorm_baseline", "conv_bn_relu_fused"}  # 5-10 MB reports: kept out of git
for js in sorted((src / "prof").glob("*.json")):
    data = json.loads(js.read_text())
    csv_text = js.with_suffix(".csv").read_text()
    kernels = parse_raw_csv(csv_text)
    s0 = data["summary"]
    dtype = "bfloat16"
    peaks = spec.peaks_for(dtype)
    summary = summarize(kernels, analytic_bytes=s0["analytic_bytes"], analytic_tensor_flops=s0["analytic_tensor_flops"],
                        analytic_vector_flops=s0["analytic_vector_flops"], ridge=ridge_point(kernels, peaks))
    rep = js.with_suffix(".ncu-rep")
    keep = not any(b in js.name for b in big)
    target = dst / "profiles" / rep.name
    if keep:
        shutil.copy(rep, target)
    res = ProfileResult(data["created"], data["device_name"], data["workload"], data["impl"], data["case_id"],
                        data["t_sol"], str(target) if keep else f"(not committed: {rep.stat().st_size >> 20} MB) {rep.name}",
                        data["ncu_version"], data["range_mode"], tuple(data["command"]), summary, csv_text)
    (dst / "profiles" / js.name).write_text(json.dumps(profile_dict(res), indent=1) + "\n")
    (dst / "profiles" / js.with_suffix(".csv").name).write_text(csv_text)
    out.print(f"$ solbench profile ... -w {res.workload} -i {res.impl} --case '{res.case_id}'", markup=False)
    out.print(_profile_table(res))
    out.print(f"diagnosis: {summary.diagnosis}", markup=False, soft_wrap=True)
    out.print(f"report: {res.ncu_rep}", markup=False, soft_wrap=True)
    out.print()
(dst / "profiles" / "profiles.txt").write_text(out.export_text())

d = json.loads((src / "tune-layernorm.json").read_text())
def trial(t): return tuning.Trial(**{**t, "samples": tuple(t["samples"])})
cases = []
for c in d["cases"]:
    ct = tuning.CaseTuning(c["workload"], c["impl"], c["case_id"], c["dtype"], c["case_params"], trial(c["hand_picked"]),
                           tuple(trial(t) for t in c["trials"]), c["filtered"], c["untried"], c["winner"])
    # the capture holds each side's confirmation pooled ("stop_reason": "pooled"), its round boundaries not
    # recorded: one round a side, which the confirmation over rounds cannot decide (INCONCLUSIVE)
    cases.append(tuning.confirm(ct, [trial(c["confirm_hand_picked"])], [trial(c["confirm_winner"])], 0.01))
opts = {**d["options"], "min_gain": 0.01}
result = tuning.TuneResult(d["created"], Environment(**d["environment"]), tuple(d["workload_files"]), opts, tuple(cases))
(dst / "tune-layernorm.json").write_text(json.dumps(tuning.result_dict(result), indent=1) + "\n")
(dst / "tuned.json").write_text(tuning.tuned_file(result))
t = Console(width=200, record=True, highlight=False)
t.print(_tune_table(result))
(dst / "tune-layernorm.txt").write_text(t.export_text())
print(t.export_text())
for c in cases: print(c.case_id, c.verdict, c.confirm_ratio_ci, c.confirm_p, c.gain)
