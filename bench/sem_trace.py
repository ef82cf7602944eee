"""Which semaphores were registered with the resource tracker and never unregistered, by process and
where they were made: reads bench/sem_trace/sitecustomize.py's logs (argv[1]: their folder)."""
import collections
import pathlib
import re
import sys

made: dict[str, tuple[str, str]] = {}
for path in sorted(pathlib.Path(sys.argv[1]).glob("sem-*.log")):
    text = path.read_text()
    for block in re.split(r"(?m)^(?=(?:register|unregister) )", text):
        if not block.strip():
            continue
        head, _, stack = block.partition("\n")
        action, rtype, name, *who = head.split(" ", 3)
        if action == "register":
            made[name] = (" ".join(who), stack)
        else:
            made.pop(name, None)
print(f"{len(made)} registered and never unregistered")
for (who, stack), n in collections.Counter(made.values()).most_common():
    print(f"\n{n} x {who}\n{stack}")
