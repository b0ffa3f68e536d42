#!/usr/bin/env python3
"""Runs the README's shell blocks as printed (ctest: readme_blocks).

Usage: run_readme_blocks.py REPO SHARED [SECTION ...]

Each section below is run in a fresh folder that looks like a checkout
beside ../shared (build/, configs/, scripts/, deploy/ linked to REPO; its own
empty .cache/), in its own session, with `set -eo pipefail`: a command that
fails fails the block. The README marks the commands it expects to fail with
a trailing comment (`# refused`, `# exit 1 ...`); those must fail. Whatever a
block leaves running (`serve ... &`) is killed when it ends.

Sections not run here are run elsewhere: the quick start's curl calls by
tests/serve/curl_quickstart.sh, the step-by-step upgrade by
tests/serve/base_upgrade.sh; building and the reliability jobs are CI itself.
Prints one line per block with its time; exits 1 when any block failed.
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

# Section heading -> seconds it may take. Blocks of one section run in order, in one folder.
SECTIONS = {
    "## Serving a real model and adapters": 120,
    "## Training adapters": 300,
    "### In one command, from the scenarios' training data": 900,
    "## Quantised bases": 300,
    "## Evaluating a candidate base": 300,
    "## A fleet of replicas": 300,
}
EXPECTED_FAILURE = re.compile(r"#\s*(refused|exit [1-9])")
LINKED = ("build", "configs", "scripts", "deploy", "tests")


def blocks_by_section(readme):
    """{heading: [block text, ...]} for every ```sh block."""
    out, heading, block = {}, None, None
    for line in readme.split("\n"):
        if block is not None:
            if line.startswith("```"):
                out.setdefault(heading, []).append("\n".join(block))
                block = None
            else:
                block.append(line)
        elif line.startswith("#"):
            heading = line.strip()
        elif line.startswith("```sh"):
            block = []
    return out


def mark_expected_failures(text):
    """Prefixes `! ` to each top-level command the README says fails, so that
    `set -e` lets it fail and stops the block when it does not."""
    lines = text.split("\n")
    out, depth, heredoc, start = [], 0, None, None
    for i, line in enumerate(lines):
        out.append(line)
        if heredoc is not None:
            if line.strip() == heredoc:
                heredoc = None
            continue
        m = re.search(r"<<-?\s*'?(\w+)'?", line)
        if m:
            heredoc = m.group(1)
        stripped = line.strip()
        if start is None:
            start = len(out) - 1
        code = stripped.split("#", 1)[0].rstrip()
        if code.endswith("\\"):
            continue  # the command goes on
        if re.match(r"(for|while|until|if)\b", out[start].strip()):
            depth += 1
        if re.match(r"(done|fi)\b", stripped):
            depth -= 1
        if depth == 0 and EXPECTED_FAILURE.search(line) and out[start].strip():
            out[start] = "! " + out[start]
        start = None
    return "\n".join(out)


def make_checkout(repo, shared):
    root = tempfile.mkdtemp(prefix="lg-readme-")
    os.chmod(root, 0o711)  # the fleet's PostgreSQL runs as user postgres and must reach its folder
    work = os.path.join(root, "repo")
    os.mkdir(work)
    for name in LINKED:
        os.symlink(os.path.join(repo, name), os.path.join(work, name))
    os.symlink(os.path.abspath(shared), os.path.join(root, "shared"))
    return root, work


def run_section(heading, blocks, repo, shared, limit_s):
    root, work = make_checkout(repo, shared)
    script = os.path.join(root, "block.sh")
    with open(script, "w") as f:
        f.write("set -eo pipefail\n")
        for b in blocks:
            f.write(mark_expected_failures(b) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORAGATE_")}
    t0 = time.monotonic()
    log_path = os.path.join(root, "block.log")
    # Output to a file, not a pipe: a server the block leaves running keeps its
    # stdout open, and a pipe would not end until it does.
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(["bash", script], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        rc = proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        rc = "timeout"
    finally:
        for sig in (signal.SIGTERM, signal.SIGKILL):  # what the block left running (serve ... &)
            try:
                os.killpg(proc.pid, sig)
                time.sleep(0.5)
            except ProcessLookupError:
                break
        if heading == "## A fleet of replicas":  # its replicas run in their own sessions
            subprocess.run(["bash", "scripts/fleet.sh", "down", "--dir", ".cache/fleet"], cwd=work,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    ok = rc == 0
    print(f"readme: {'ok    ' if ok else 'FAILED'} {heading.lstrip('# ')} ({seconds:.1f} s, exit {rc})", flush=True)
    if not ok:
        with open(log_path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        print("\n".join(line for line in text.split("\n")[-60:] if not line.startswith('{"')))
    shutil.rmtree(root, ignore_errors=True)
    return ok


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    repo, shared = os.path.abspath(sys.argv[1]), sys.argv[2]
    if not os.path.isdir(os.path.join(shared, "eval")):
        if os.environ.get("CI") == "true":
            print(f"readme: {shared}/eval is missing (CI=true: a missing fixture fails)")
            return 1
        print(f"readme: SKIPPED: {shared}/eval is missing")
        return 0
    wanted = sys.argv[3:] or list(SECTIONS)
    with open(os.path.join(repo, "README.md"), encoding="utf-8") as f:
        found = blocks_by_section(f.read())
    failed = 0
    for heading in wanted:
        if heading not in found:
            print(f"readme: FAILED {heading}: no such section with a sh block in README.md")
            failed += 1
            continue
        failed += 0 if run_section(heading, found[heading], repo, shared, SECTIONS.get(heading, 300)) else 1
    print(f"readme: {len(wanted) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
