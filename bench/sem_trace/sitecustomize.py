"""Trace every named semaphore a Python process registers with multiprocessing's resource tracker and
every one it unregisters, to $SEMTRACE_DIR/sem-<pid>.log (the semtrace part of bench/session26.sh: which process leaves
the semaphores that the tracker reports leaked at the end of a run that compiled ahead)."""
import os

if os.environ.get("SEMTRACE_DIR"):
    import sys
    import traceback
    from multiprocessing import resource_tracker

    _register, _unregister = resource_tracker.register, resource_tracker.unregister

    def _log(action: str, name: str, rtype: str) -> None:
        stack = "".join(traceback.format_stack(limit=14)[:-2]) if action == "register" else ""
        with open(os.path.join(os.environ["SEMTRACE_DIR"], f"sem-{os.getpid()}.log"), "a") as f:
            f.write(f"{action} {rtype} {name} pid={os.getpid()} ppid={os.getppid()} argv={sys.argv[:3]}\n{stack}")

    def register(name: str, rtype: str) -> None:
        _log("register", name, rtype)
        _register(name, rtype)

    def unregister(name: str, rtype: str) -> None:
        _log("unregister", name, rtype)
        _unregister(name, rtype)

    resource_tracker.register, resource_tracker.unregister = register, unregister
