#!/usr/bin/env python3
"""The tree's dependency rules, checked on the sources (ctest: layering).

1. Rooms are ranked; a file may include headers of its own room and of rooms
   ranked lower, never of a room ranked higher or beside it:
     common < {kernels, tokenizer, chat, registry, client} < {model, grammar} < adapters
     < engine < {bases, trainer} < {evaluator, fleet} < upgrade < gateway < bench < cli
2. The façade: what bases/, evaluator/ and gateway/ include, followed through
   every project header it pulls in, reaches no kernels/ header and no
   engine/ header but engine/api.h (and what api.h itself includes).
3. The map: every room (a top-level folder with a CMakeLists.txt) is ranked
   here and named as `room/` in docs/ARCHITECTURE.md, so a new room cannot
   land without a place in the order and on the map.

Prints every violation as file:line and exits 1 when there is any.
"""
import os
import re
import sys

RANK = {
    "common": 0,
    "kernels": 1, "tokenizer": 1, "chat": 1, "registry": 1, "client": 1,
    "model": 2, "grammar": 2,
    "adapters": 3,
    "engine": 4,
    "bases": 5, "trainer": 5,
    "evaluator": 6, "fleet": 6,
    "upgrade": 7,
    "gateway": 8,
    "bench": 9,
    "cli": 10,
}
FACADE_USERS = ("bases", "evaluator", "fleet", "upgrade", "gateway")
MAP = "docs/ARCHITECTURE.md"
NOT_ROOMS = ("tests",)
FACADE = "engine/api.h"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_EXT = (".h", ".cpp", ".cu", ".cuh")


def includes(root, path):
    """(line number, included project path) for each quoted include of `path`."""
    out = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m and os.path.exists(os.path.join(root, m.group(1))):
                out.append((n, m.group(1)))
    return out


def room(path):
    return path.split("/", 1)[0]


def sources(root):
    for r in RANK:
        for dirpath, _, files in os.walk(os.path.join(root, r)):
            for name in sorted(files):
                if name.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, name), root)


def rank_violations(root):
    bad = []
    for path in sources(root):
        here = room(path)
        for n, inc in includes(root, path):
            there = room(inc)
            if there == here or there not in RANK:
                continue
            if RANK[there] >= RANK[here]:
                bad.append(f"{path}:{n}: {here}/ includes {inc} ({there}/ is not below {here}/)")
    return bad


def facade_violations(root):
    # Headers reachable from the façade itself are allowed: they are what it shows.
    allowed, stack = {FACADE}, [FACADE]
    while stack:
        for _, inc in includes(root, stack.pop()):
            if inc not in allowed:
                allowed.add(inc)
                stack.append(inc)
    bad = []
    for path in sources(root):
        if room(path) not in FACADE_USERS:
            continue
        seen, stack = set(), [(path, None)]
        while stack:
            current, via = stack.pop()
            for n, inc in includes(root, current):
                if inc in seen:
                    continue
                seen.add(inc)
                hidden = room(inc) == "kernels" or (room(inc) == "engine" and inc not in allowed)
                if hidden:
                    where = f"{path}" + (f" (through {via})" if via else f":{n}")
                    bad.append(f"{where}: reaches {inc}; {room(path)}/ sees the engine only through {FACADE}")
                    continue
                if room(inc) != room(path):  # follow other rooms' headers; own-room ones are checked as sources
                    stack.append((inc, via or inc))
    return bad


def map_violations(root):
    """Rooms on disk that the ranks or the map leave out."""
    on_disk = sorted(d for d in os.listdir(root)
                     if d not in NOT_ROOMS and os.path.isfile(os.path.join(root, d, "CMakeLists.txt")))
    bad = [f"{d}/: a room with no rank in tests/layering/check_layers.py" for d in on_disk if d not in RANK]
    map_path = os.path.join(root, MAP)
    text = open(map_path, encoding="utf-8").read() if os.path.exists(map_path) else ""
    bad += [f"{d}/: a room missing from {MAP}" for d in on_disk if f"`{d}/`" not in text]
    return bad


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    root = os.path.abspath(root)
    bad = rank_violations(root) + map_violations(root)
    if os.path.exists(os.path.join(root, FACADE)):
        bad += facade_violations(root)
    for line in bad:
        print(line)
    print(f"layering: {len(bad)} violation(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
