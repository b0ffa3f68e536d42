#!/usr/bin/env python3
"""The fleet's figures (issue 22, point 7), on fleets that scripts/fleet.sh runs.

  fleet_bench.py --loragate BIN --model DIR [--adapter DIR] [--seconds S] [--port P]

For 1 and then 3 replicas it brings a fleet up (PostgreSQL + HAProxy +
replicas), registers 8 adapters (copies of --adapter under 8 names), and
measures, with the same requests:
  - the proxy's added latency: one-token completions sent one at a time,
    alternately straight to a replica and through the proxy (medians and p90
    of each, and their difference);
  - requests/s through the proxy with 8 concurrent clients for S seconds;
  - adapter affinity under a Zipf(1.1) choice of the 8 adapters: for each
    adapter, the share of its requests that its most used replica served
    (from each replica's loragate_requests_total), weighted by requests;
  - on the 3-replica fleet, how long a rolling promote of a second base takes
    (--candidate DIR; forced, no evaluation) and what each replica's swap took.
Prints one line per figure and a JSON summary last. Standard library only.
"""
import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
p = argparse.ArgumentParser()
p.add_argument("--loragate", required=True)
p.add_argument("--model", required=True)
p.add_argument("--adapter", required=True, help="a PEFT adapter folder of --model")
p.add_argument("--candidate", default="", help="a second base (for the rollout figure)")
p.add_argument("--candidate-adapter", default="", help="the adapter of --candidate")
p.add_argument("--seconds", type=float, default=10)
p.add_argument("--port", type=int, default=23000)
p.add_argument("--latency-requests", type=int, default=200)
args = p.parse_args()
token = "fleet-bench-token"
env = dict(os.environ, LORAGATE_BIN=os.path.abspath(args.loragate), LORAGATE_ADMIN_TOKEN=token)


def call(url, path, body=None, method=None, headers=None, timeout=120):
    h = {"Content-Type": "application/json", "Authorization": "Bearer " + token}
    h.update(headers or {})
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data, h, method=method)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.status, r.read().decode()


def metric_counts(url):
    _, text = call(url, "/metrics")
    counts = {}
    for line in text.splitlines():
        m = re.match(r'loragate_requests_total\{(.*)\} ([0-9.e+]+)$', line)
        if not m:
            continue
        adapter = re.search(r'adapter="([^"]*)"', m.group(1))
        if adapter and adapter.group(1):
            counts[adapter.group(1)] = counts.get(adapter.group(1), 0) + float(m.group(2))
    return counts


def fleet(replicas, work):
    d = os.path.join(work, "fleet%d" % replicas)
    if os.getuid() == 0:
        os.chmod(work, 0o755)
    adapters = os.path.join(work, "adapters")
    bases = [os.path.dirname(os.path.abspath(args.model))]
    if args.candidate:
        bases.append(os.path.dirname(os.path.abspath(args.candidate)))
    cmd = ["bash", os.path.join(root, "scripts/fleet.sh"), "up", "--replicas", str(replicas), "--port", str(args.port),
           "--dir", d, "--", "--model", args.model, "--served-name", "online", "--adapter-root", adapters]
    for b in bases:
        cmd += ["--base-root", b]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return d


def down(d):
    subprocess.run(["bash", os.path.join(root, "scripts/fleet.sh"), "down", "--dir", d], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def one(url, model):
    t = time.perf_counter()
    call(url, "/v1/completions", {"model": model, "prompt": "Once upon a time", "max_tokens": 1, "temperature": 0})
    return (time.perf_counter() - t) * 1e3


def measure(replicas, work):
    d = fleet(replicas, work)
    proxy = "http://127.0.0.1:%d" % args.port
    urls = ["http://127.0.0.1:%d" % (args.port + i) for i in range(1, replicas + 1)]
    out = {"replicas": replicas}
    try:
        names = ["tenant-%d" % i for i in range(8)]
        for n in names:
            call(proxy, "/admin/adapters", {"name": n, "path": os.path.join(work, "adapters", n)})
        time.sleep(1.5)
        for n in names:  # warm every cache
            for u in urls:
                one(u, n)
        direct, proxied = [], []
        for i in range(args.latency_requests):
            direct.append(one(urls[i % replicas], "tenant-0"))
            proxied.append(one(proxy, "tenant-0"))
        q = lambda xs, f: sorted(xs)[int(f * (len(xs) - 1))]
        out["direct_ms_p50"], out["proxy_ms_p50"] = statistics.median(direct), statistics.median(proxied)
        out["direct_ms_p90"], out["proxy_ms_p90"] = q(direct, 0.9), q(proxied, 0.9)
        out["proxy_added_ms_p50"] = out["proxy_ms_p50"] - out["direct_ms_p50"]
        print("%d replica(s): one-token completion direct p50 %.2f ms p90 %.2f, through HAProxy p50 %.2f p90 %.2f: "
              "+%.2f ms" % (replicas, out["direct_ms_p50"], out["direct_ms_p90"], out["proxy_ms_p50"],
                            out["proxy_ms_p90"], out["proxy_added_ms_p50"]), flush=True)

        before = {u: metric_counts(u) for u in urls}
        weights = [1 / (k + 1) ** 1.1 for k in range(8)]
        done = [0]
        stop = time.time() + args.seconds
        lock = threading.Lock()

        def worker(seed):
            rng = random.Random(seed)
            while time.time() < stop:
                one(proxy, rng.choices(names, weights)[0])
                with lock:
                    done[0] += 1

        threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
        t0 = time.time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out["requests_per_s"] = done[0] / (time.time() - t0)
        after = {u: metric_counts(u) for u in urls}
        served, top = 0, 0
        for n in names:
            per = [after[u].get(n, 0) - before[u].get(n, 0) for u in urls]
            served += sum(per)
            top += max(per)
        out["affinity_hit_rate"] = top / served if served else 0.0
        print("%d replica(s): %.1f requests/s through HAProxy (8 clients, Zipf over 8 adapters, %.0f s); "
              "affinity: %.1f%% of each adapter's requests on its most used replica"
              % (replicas, out["requests_per_s"], args.seconds, 100 * out["affinity_hit_rate"]), flush=True)

        if replicas > 1 and args.candidate:
            call(proxy, "/admin/bases", {"name": "candidate", "path": args.candidate})
            while True:
                _, text = call(proxy, "/admin/fleet")
                states = [b["state"] for r in json.loads(text)["replicas"] for b in r["bases"] if b["name"] == "candidate"]
                if states.count("candidate") == replicas:
                    break
                time.sleep(0.2)
            for n in names:
                call(proxy, "/admin/adapters", {"name": n, "base": "candidate",
                                                "path": os.path.join(work, "adapters", "candidate-adapter")})
            time.sleep(1.5)
            t = time.perf_counter()
            _, text = call(proxy, "/admin/bases/candidate/promote", {"force": True}, timeout=600)
            out["rollout_s"] = time.perf_counter() - t
            out["rollout_steps"] = json.loads(text)["rollout"]["steps"]
            print("%d replicas: rolling promote took %.2f s (%s)" % (
                replicas, out["rollout_s"], ", ".join("%s %d ms" % (s["replica"].rsplit(":", 1)[1], s["swap_ms"])
                                                      for s in out["rollout_steps"])), flush=True)
    finally:
        down(d)
    return out


work = tempfile.mkdtemp(prefix="lg-fleet-bench-")
try:
    os.makedirs(os.path.join(work, "adapters"))
    for i in range(8):
        shutil.copytree(args.adapter, os.path.join(work, "adapters", "tenant-%d" % i))
    if args.candidate_adapter:  # inside the adapter root too
        shutil.copytree(args.candidate_adapter, os.path.join(work, "adapters", "candidate-adapter"))
    print("machine: %s, %d cores, load %s" % (
        open("/proc/cpuinfo").read().split("model name")[1].split(":")[1].split("\n")[0].strip(), os.cpu_count(),
        open("/proc/loadavg").read().split()[:3]), flush=True)
    results = [measure(1, work), measure(3, work)]
    print(json.dumps(results))
finally:
    shutil.rmtree(work, ignore_errors=True)
