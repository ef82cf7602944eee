"""Does importing torch.compile's machinery initialize the CUDA driver or start threads in the
importing process? (A fork server that preloads it must stay fork-safe.) Prints one line per step;
a forked child then tries CUDA."""

import ctypes
import os
import sys
import threading


def probe(label: str) -> None:
    with open("/proc/self/maps") as f:
        maps = f.read()
    state = "libcuda not loaded"
    if "libcuda.so" in maps:
        lib = ctypes.CDLL("libcuda.so.1", mode=getattr(os, "RTLD_NOLOAD", 4))
        ctx = ctypes.c_void_p()
        state = f"libcuda loaded, cuCtxGetCurrent -> {lib.cuCtxGetCurrent(ctypes.byref(ctx))} (3: not initialized)"
    tasks = len(os.listdir("/proc/self/task"))
    torch = sys.modules.get("torch")
    init = torch.cuda.is_initialized() if torch is not None else None
    print(f"{label:32s} {state}; OS threads {tasks}; python threads {threading.active_count()}; torch init {init}",
          flush=True)


probe("start")
import torch  # noqa: E402

probe("torch")
for name in sys.argv[1:] or ["torch._dynamo", "torch._inductor.compile_fx"]:
    try:
        __import__(name)
        probe(name)
    except BaseException as e:
        print(f"{name}: {type(e).__name__}: {e}", flush=True)
pid = os.fork()
if pid == 0:
    try:
        print("child:", torch.ones(4, device="cuda").sum().item(), flush=True)
        os._exit(0)
    except BaseException as e:
        print(f"child: {type(e).__name__}: {e}", flush=True)
        os._exit(1)
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
