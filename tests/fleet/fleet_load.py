#!/usr/bin/env python3
"""Continuous load through a fleet's proxy while something happens to it.

Usage: fleet_load.py URL EXPECTED_JSON OUT_JSON STOP_FILE [--workers N]

Each worker sends, until STOP_FILE exists, greedy completions (every other
one streaming) of one prompt with one scenario header, and checks every
answer against EXPECTED_JSON: {"<base name>": "<greedy text>", ...}, keyed
by the base the answer names (X-Base, also system_fingerprint's prefix).
Writes {"ok", "failed", "wrong", "by_base", "errors": [...]} to OUT_JSON.
Standard library only: it runs wherever python3 does.
"""
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request

url, expected_path, out_path, stop_file = sys.argv[1:5]
workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 4
scenario = os.environ.get("FLEET_LOAD_SCENARIO", "")
prompt = os.environ.get("FLEET_LOAD_PROMPT", "Once upon a time")
max_tokens = int(os.environ.get("FLEET_LOAD_TOKENS", "12"))
expected = json.load(open(expected_path))
lock = threading.Lock()
result = {"ok": 0, "failed": 0, "wrong": 0, "by_base": {}, "errors": []}


def note(kind, detail=None, base=None):
    with lock:
        result[kind] += 1
        if base is not None:
            result["by_base"][base] = result["by_base"].get(base, 0) + 1
        if detail is not None and len(result["errors"]) < 50:
            result["errors"].append(detail)


def one(stream):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    headers = {"Content-Type": "application/json"}
    if scenario:
        headers["X-Scenario"] = scenario
    req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            base = r.headers.get("X-Base", "")
            raw = r.read().decode()
    except (urllib.error.URLError, OSError) as e:
        note("failed", "%s: %s" % ("stream" if stream else "plain", e))
        return
    text = ""
    if stream:
        for line in raw.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                for c in json.loads(line[6:]).get("choices", []):
                    text += c.get("text", "")
    else:
        text = json.loads(raw)["choices"][0]["text"]
    if base not in expected:
        note("wrong", "answered by unknown base %r" % base)
    elif text != expected[base]:
        note("wrong", "base %s: %r != %r" % (base, text, expected[base]), base)
    else:
        note("ok", None, base)


def worker(i):
    n = 0
    while not os.path.exists(stop_file):
        one(stream=(n + i) % 2 == 1)
        n += 1


threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
for t in threads:
    t.start()
for t in threads:
    t.join()
json.dump(result, open(out_path, "w"), indent=1)
print("load: %d ok, %d failed, %d wrong, by base %s" % (result["ok"], result["failed"], result["wrong"],
                                                        result["by_base"]))
