#!/usr/bin/env python3
"""Validates deploy/kubernetes offline (no cluster): every YAML document
parses and carries the fields the fleet depends on.

  check_manifests.py SOURCE_DIR

Checks: each document has apiVersion, kind and metadata.name, with the
apiVersion its kind needs; the Deployment's selector matches its pod labels,
and so do the Service's and the InferencePool's selectors; readiness probes
GET /ready and liveness GET /health on the container's port, and both routes
exist in gateway/gateway.cpp; the container runs `serve` with --registry
taken from an env var that comes from a Secret defined here, the admin token
(LORAGATE_ADMIN_TOKEN) from a Secret too, every flag it passes exists in
cli/cmd_serve.cpp; --config names a file of a mounted ConfigMap whose
loragate.yaml parses and uses only top-level keys of configs/loragate.yaml;
the InferencePool targets the container port and names an endpoint picker;
each InferenceObjective references the InferencePool; kustomization.yaml
lists every manifest.

Then it proves itself: a set of broken copies of the manifests (a probe on
the wrong path, a selector that matches nothing, --registry from a literal,
...) must each be rejected. Exit status 0 when all holds, 1 with every
problem listed otherwise.
"""
import copy
import os
import re
import sys

try:
    import yaml
except ImportError:  # scripts/setup.sh installs python3-yaml
    if os.environ.get("CI") == "true":
        print("check_manifests: FAILED: python3-yaml is not installed (scripts/setup.sh installs it)")
        sys.exit(1)
    print("check_manifests: SKIPPED: python3-yaml is not installed (scripts/setup.sh installs it)")
    sys.exit(0)

API_VERSIONS = {
    "Deployment": "apps/v1",
    "Service": "v1",
    "Secret": "v1",
    "ConfigMap": "v1",
    "PersistentVolumeClaim": "v1",
    "InferencePool": "inference.networking.k8s.io/v1",
    "InferenceObjective": "inference.networking.x-k8s.io/v1alpha2",
    "Kustomization": "kustomize.config.k8s.io/v1beta1",
}
REQUIRED_KINDS = ["Deployment", "Service", "Secret", "InferencePool", "InferenceObjective"]


def load_documents(kube_dir):
    """[(file name, document)] of every non-empty document of every *.yaml."""
    docs = []
    for name in sorted(os.listdir(kube_dir)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(kube_dir, name), encoding="utf-8") as f:
            try:
                for doc in yaml.safe_load_all(f):
                    if doc is not None:
                        docs.append((name, doc))
            except yaml.YAMLError as e:
                raise SystemExit(f"check_manifests: {name} is not valid YAML: {e}")
    return docs


def dig(obj, *path):
    for key in path:
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


def selects(selector, labels):
    """True when every key: value of `selector` is in `labels` (and there is one)."""
    return bool(selector) and isinstance(labels, dict) and all(labels.get(k) == v for k, v in selector.items())


def serve_flags(source_dir):
    with open(os.path.join(source_dir, "cli/cmd_serve.cpp"), encoding="utf-8") as f:
        return set(re.findall(r'add_option\("(--[a-z-]+)"', f.read()))


def gateway_routes(source_dir):
    with open(os.path.join(source_dir, "gateway/gateway.cpp"), encoding="utf-8") as f:
        return set(re.findall(r'router_\.add\(http::verb::get, "(/[a-z]+)"', f.read()))


def config_keys(source_dir):
    with open(os.path.join(source_dir, "configs/loragate.yaml"), encoding="utf-8") as f:
        return set(yaml.safe_load(f).keys())


def check(docs, source_dir):
    """Every problem found, as 'file: kind/name: what'."""
    problems = []
    by_kind = {}
    for file, doc in docs:
        where = f"{file}: {doc.get('kind', '?')}/{dig(doc, 'metadata', 'name') or '?'}"
        if not isinstance(doc, dict) or not doc.get("kind") or not doc.get("apiVersion"):
            problems.append(f"{where}: needs apiVersion and kind")
            continue
        kind = doc["kind"]
        if kind != "Kustomization" and not dig(doc, "metadata", "name"):
            problems.append(f"{where}: needs metadata.name")
        if kind not in API_VERSIONS:
            problems.append(f"{where}: unexpected kind")
        elif doc["apiVersion"] != API_VERSIONS[kind]:
            problems.append(f"{where}: apiVersion {doc['apiVersion']}, expected {API_VERSIONS[kind]}")
        by_kind.setdefault(kind, []).append((where, doc))
    files = {f for f, d in docs if d.get("kind") != "Kustomization"}
    for where, d in by_kind.get("Kustomization", []):
        if set(d.get("resources") or []) != files:
            problems.append(f"{where}: resources {sorted(d.get('resources') or [])} must list every manifest "
                            f"{sorted(files)}")
    for kind in REQUIRED_KINDS:
        if kind not in by_kind:
            problems.append(f"no {kind} in the manifests")
    if problems:
        return problems

    secrets = {dig(d, "metadata", "name"): {**(d.get("stringData") or {}), **(d.get("data") or {})}
               for _, d in by_kind.get("Secret", [])}
    config_maps = {dig(d, "metadata", "name"): d.get("data") or {} for _, d in by_kind.get("ConfigMap", [])}
    pools = {dig(d, "metadata", "name"): d for _, d in by_kind["InferencePool"]}
    flags = serve_flags(source_dir)
    routes = gateway_routes(source_dir)
    known_config_keys = config_keys(source_dir)

    def from_secret(where, env, name):
        ref = dig(env.get(name) or {}, "valueFrom", "secretKeyRef")
        if not ref:
            problems.append(f"{where}: env {name} must come from a Secret (valueFrom.secretKeyRef)")
        elif ref.get("key") not in secrets.get(ref.get("name"), {}):
            problems.append(f"{where}: env {name} names secret {ref.get('name')} key {ref.get('key')}, not defined")

    pod_labels = []  # (where, labels, container ports by name, numbers)
    for where, d in by_kind["Deployment"]:
        labels = dig(d, "spec", "template", "metadata", "labels") or {}
        if not selects(dig(d, "spec", "selector", "matchLabels"), labels):
            problems.append(f"{where}: spec.selector.matchLabels does not match the pod template's labels")
        containers = dig(d, "spec", "template", "spec", "containers") or []
        if len(containers) != 1:
            problems.append(f"{where}: expected one container, found {len(containers)}")
            continue
        c = containers[0]
        ports = {p.get("name"): p.get("containerPort") for p in c.get("ports") or []}
        pod_labels.append((where, labels, ports))
        for probe, path in (("readinessProbe", "/ready"), ("livenessProbe", "/health")):
            get = dig(c, probe, "httpGet") or {}
            if get.get("path") != path:
                problems.append(f"{where}: {probe} must GET {path}, has {get.get('path')}")
            if path not in routes:
                problems.append(f"{where}: {probe} path {path} is not a route of gateway/gateway.cpp")
            port = get.get("port")
            if port not in ports and port not in ports.values():
                problems.append(f"{where}: {probe} port {port} is not a container port")
        args = [str(a) for a in c.get("args") or []]
        if not args or args[0] != "serve":
            problems.append(f"{where}: the container must run `serve` (args[0]), has {args[:1]}")
        for a in args:
            if a.startswith("--") and a not in flags:
                problems.append(f"{where}: flag {a} is not a `loragate serve` flag (cli/cmd_serve.cpp)")
        env = {e.get("name"): e for e in c.get("env") or []}

        def value_of(flag):
            return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None

        registry = value_of("--registry")
        m = re.fullmatch(r"\$\((\w+)\)", registry or "")
        if not m:
            problems.append(f"{where}: --registry must be $(VAR) of an env var from a Secret, has {registry}")
        else:
            from_secret(where, env, m.group(1))
        from_secret(where, env, "LORAGATE_ADMIN_TOKEN")
        port = value_of("--port")
        if port is None or int(port) not in ports.values():
            problems.append(f"{where}: --port {port} is not a container port")
        config = value_of("--config")
        if config is not None:
            mounts = {v.get("name"): v.get("mountPath") for v in c.get("volumeMounts") or []}
            volumes = {v.get("name"): v for v in dig(d, "spec", "template", "spec", "volumes") or []}
            found = False
            for vol, mount in mounts.items():
                cm = dig(volumes.get(vol) or {}, "configMap", "name")
                if cm and config.startswith(mount.rstrip("/") + "/"):
                    key = config[len(mount.rstrip("/")) + 1:]
                    if key not in config_maps.get(cm, {}):
                        problems.append(f"{where}: --config {config}: ConfigMap {cm} has no key {key}")
                    else:
                        found = True
                        body = yaml.safe_load(config_maps[cm][key]) or {}
                        unknown = set(body) - known_config_keys
                        if unknown:
                            problems.append(f"{where}: ConfigMap {cm} {key}: unknown keys {sorted(unknown)}")
            if not found and not any("has no key" in p for p in problems):
                problems.append(f"{where}: --config {config} is not in a mounted ConfigMap")

    def matches_a_pod(selector):
        return [p for p in pod_labels if selects(selector, p[1])]

    for where, d in by_kind["Service"]:
        pods = matches_a_pod(dig(d, "spec", "selector"))
        if not pods:
            problems.append(f"{where}: spec.selector matches no Deployment's pods")
        for p in dig(d, "spec", "ports") or []:
            target = p.get("targetPort", p.get("port"))
            if pods and target not in pods[0][2] and target not in pods[0][2].values():
                problems.append(f"{where}: targetPort {target} is not a container port")
    for where, d in by_kind["InferencePool"]:
        pods = matches_a_pod(dig(d, "spec", "selector", "matchLabels"))
        if not pods:
            problems.append(f"{where}: spec.selector.matchLabels matches no Deployment's pods")
        numbers = [p.get("number") for p in dig(d, "spec", "targetPorts") or []]
        if len(numbers) != 1 or (pods and numbers[0] not in pods[0][2].values()):
            problems.append(f"{where}: spec.targetPorts must be the one container port, has {numbers}")
        if not dig(d, "spec", "endpointPickerRef", "name"):
            problems.append(f"{where}: spec.endpointPickerRef.name is required")
    for where, d in by_kind["InferenceObjective"]:
        ref = dig(d, "spec", "poolRef") or {}
        if ref.get("name") not in pools:
            problems.append(f"{where}: spec.poolRef.name {ref.get('name')} is not an InferencePool here")
        if ref.get("group", "inference.networking.k8s.io") != "inference.networking.k8s.io":
            problems.append(f"{where}: spec.poolRef.group must be inference.networking.k8s.io")
        if not isinstance(dig(d, "spec", "priority"), int):
            problems.append(f"{where}: spec.priority must be an integer")
    return problems


# Broken copies that must each be rejected: (what is broken, how).
def _container(docs):
    return next(d for _, d in docs if d.get("kind") == "Deployment")["spec"]["template"]["spec"]["containers"][0]


def _first(docs, kind):
    return next(d for _, d in docs if d.get("kind") == kind)


def _replace_arg(docs, flag, value):
    args = _container(docs)["args"]
    args[args.index(flag) + 1] = value


MUTATIONS = [
    ("readiness on /health", lambda ds: _container(ds)["readinessProbe"]["httpGet"].update(path="/health")),
    ("liveness on /healthz", lambda ds: _container(ds)["livenessProbe"]["httpGet"].update(path="/healthz")),
    ("Service selecting other pods", lambda ds: _first(ds, "Service")["spec"]["selector"].update(tier="x")),
    ("pool selecting other pods",
     lambda ds: _first(ds, "InferencePool")["spec"]["selector"]["matchLabels"].update(tier="x")),
    ("Deployment selector off its labels",
     lambda ds: _first(ds, "Deployment")["spec"]["selector"]["matchLabels"].update(tier="x")),
    ("--registry a literal", lambda ds: _replace_arg(ds, "--registry", "postgresql://u:p@db/x")),
    ("--registry env not from a Secret",
     lambda ds: [e.update(value="x") or e.pop("valueFrom") for e in _container(ds)["env"]
                 if e["name"] == "LORAGATE_REGISTRY"]),
    ("admin token missing", lambda ds: _container(ds).update(
        env=[e for e in _container(ds)["env"] if e["name"] != "LORAGATE_ADMIN_TOKEN"])),
    ("a flag serve lacks", lambda ds: _container(ds)["args"].append("--no-such-flag")),
    ("pool on the wrong port", lambda ds: _first(ds, "InferencePool")["spec"].update(targetPorts=[{"number": 9}])),
    ("pool apiVersion v1alpha2",
     lambda ds: _first(ds, "InferencePool").update(apiVersion="inference.networking.x-k8s.io/v1alpha2")),
    ("objective naming no pool",
     lambda ds: _first(ds, "InferenceObjective")["spec"]["poolRef"].update(name="nope")),
    ("kustomization missing a file", lambda ds: _first(ds, "Kustomization")["resources"].pop()),
    ("no InferenceObjective", lambda ds: ds.__setitem__(
        slice(None), [(f, d) for f, d in ds if d.get("kind") != "InferenceObjective"])),
]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_manifests.py SOURCE_DIR")
    source_dir = sys.argv[1]
    docs = load_documents(os.path.join(source_dir, "deploy/kubernetes"))
    problems = check(docs, source_dir)
    for p in problems:
        print(f"check_manifests: {p}")
    if problems:
        print(f"check_manifests: FAILED: {len(problems)} problem(s) in deploy/kubernetes")
        sys.exit(1)
    missed = []
    for what, mutate in MUTATIONS:
        broken = copy.deepcopy(docs)
        mutate(broken)
        if not check(broken, source_dir):
            missed.append(what)
    if missed:
        print(f"check_manifests: FAILED: the checks accept broken manifests: {', '.join(missed)}")
        sys.exit(1)
    kinds = sorted({d["kind"] for _, d in docs})
    print(f"check_manifests: {len(docs)} documents ({', '.join(kinds)}) valid; "
          f"{len(MUTATIONS)} broken copies rejected")


if __name__ == "__main__":
    main()
