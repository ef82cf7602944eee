"""Why does the CUPTI side-stream check miss an unjoined side stream? Prints the records of one
traced honest call and one traced hostile call (50 GEMMs on a stream the current one never waits for)."""

import torch

from solbench.device.cupti import launched_in, stray_work, tracer
from solbench.measure import guards

x = torch.randn(64, 1024, device="cuda", dtype=torch.bfloat16)
w = torch.randn(1024, 1024, device="cuda", dtype=torch.bfloat16)
side = torch.cuda.Stream()


def unjoined():
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(50):
            out = torch.mm(x, w.t())
    return out


trace = tracer()
print("traced_call honest:", guards.traced_call(lambda: torch.mm(x, w.t()), trace)[1])
print("traced_call unjoined:", guards.traced_call(unjoined, trace)[1])

marker = torch.empty(1, dtype=torch.int32, device="cuda")
turned = trace.begin()
print("primed:", guards._primed(trace, marker))
torch.cuda._sleep(guards._CHECK_SPIN_CYCLES)
t0 = trace.now()
unjoined()
t1 = trace.now()
marker.zero_()
t2 = trace.now()
torch.cuda.synchronize()
calls, work = trace.collect()
trace.end(turned)
print(f"records: {len(calls)} API calls, {len(work)} activities; t1-t0 {(t1 - t0) / 1e3:.1f} us, t2-t1 {(t2 - t1) / 1e3:.1f} us")
in_window = [c for c in calls if t0 <= c.start <= t1]
print("API calls in [t0, t1]:", len(in_window), "in (t1, t2]:", len([c for c in calls if t1 < c.start <= t2]))
mine = launched_in(calls, work, t0, t1)
mark = launched_in(calls, work, t1 + 1, t2)
print("mine:", len(mine), "streams", sorted({a.stream_id for a in mine}), "kinds", sorted({a.kind for a in mine}))
print("marker:", [(a.kind, a.stream_id, a.name[:40]) for a in mark])
if mine and mark:
    b = min(a.start for a in mark)
    print("mine end - marker begin (us):", [round((a.end - b) / 1e3, 1) for a in mine[-5:]])
    print("mine start - marker begin (us):", [round((a.start - b) / 1e3, 1) for a in mine[:5]])
print("stray:", stray_work(mine, mark))
ids = {c.correlation_id for c in in_window}
unmatched = [a for a in work if a.correlation_id not in ids]
print("activities not matched to a call in the window:", len(unmatched),
      [(a.kind, a.stream_id, a.correlation_id, a.name[:30]) for a in unmatched[:8]])
print("some call correlation ids:", sorted(ids)[:10], "work ids:", sorted({a.correlation_id for a in work})[:10])
