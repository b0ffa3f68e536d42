#!/usr/bin/python3
"""Writes prompt_logprobs_ref.json: float64 teacher-forced log-probabilities
from the numpy reference (../shared/tools/hf_llama_ref.py) that
tests/engine/score_test.cpp compares the engine's prompt logprobs against.

For a few golden prompts (../shared/models/golden.json) and each of base,
a, b and c, the scored ids are prompt_ids + that variant's generated_ids;
token i (i >= 1) gets log_softmax(logits at position i - 1)[ids[i]].

Run from the repository root:
  /usr/bin/python3 tests/engine/data/make_prompt_logprobs.py
"""

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
SHARED = os.environ.get("LORAGATE_SHARED_DIR") or os.path.join(REPO, "..", "shared")
sys.path.insert(0, os.path.join(SHARED, "tools"))
from hf_llama_ref import LlamaRef  # noqa: E402

PROMPTS = [0, 3, 5]  # short, quoted, byte fallback + newline: 52, 67 and 65 tokens
VARIANTS = ["base", "a", "b", "c"]
COMMAND = "/usr/bin/python3 tests/engine/data/make_prompt_logprobs.py"


def log_softmax(logits):
    m = logits.max(axis=-1, keepdims=True)
    return logits - (m + np.log(np.exp(logits - m).sum(axis=-1, keepdims=True)))


def main():
    models = os.path.join(SHARED, "models")
    golden = json.load(open(os.path.join(models, "golden.json"), encoding="utf-8"))
    cases = []
    for variant in VARIANTS:
        adapter = "" if variant == "base" else "stories260K-lora/" + variant
        ref = LlamaRef(os.path.join(models, "stories260K"), os.path.join(models, adapter) if adapter else None)
        for p in PROMPTS:
            c = golden["cases"][p]
            ids = c["prompt_ids"] + c["outputs"][variant]["generated_ids"]
            lp = log_softmax(ref.logits_for(ids))
            values = [round(float(lp[i - 1, ids[i]]), 7) for i in range(1, len(ids))]
            cases.append({"prompt": p, "adapter": variant if adapter else "", "ids": ids, "logprobs": values})
    out = {
        "command": COMMAND,
        "what": "float64 log_softmax of hf_llama_ref.LlamaRef logits (stories260K, LoRA unmerged); "
                "logprobs[k] scores ids[k + 1] with the logits at position k; rounded to 1e-7",
        "cases": cases,
    }
    # One case per line keeps the file small and its diffs readable.
    lines = ",\n".join("  " + json.dumps(c, separators=(",", ":")) for c in cases)
    head = json.dumps({k: out[k] for k in ("command", "what")}, indent=1)[:-2]
    with open(os.path.join(HERE, "prompt_logprobs_ref.json"), "w", encoding="utf-8") as f:
        f.write(head + ',\n "cases": [\n' + lines + "\n ]\n}\n")


if __name__ == "__main__":
    main()
