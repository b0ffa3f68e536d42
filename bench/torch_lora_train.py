#!/usr/bin/python3
"""A minimal PyTorch LoRA training loop: the comparison for `loragate bench train`.

Not PEFT and nothing beyond torch: a Llama forward pass written out (RMSNorm,
rotate-half RoPE, GQA causal attention, SwiGLU), LoRA on q,k,v,o,gate,up,down
(A Kaiming-uniform U(-1/sqrt(in), 1/sqrt(in)), B zero, scaling alpha/r), the
base frozen, float32, torch.optim.Adam, cross-entropy (mean over the loss
targets) on the target tokens only, whose rows alone go through the lm_head
(as loragate does).

The examples are the ones `loragate bench train --dump-examples FILE` used
(JSONL {"ids", "target"}) walked the same way: step s takes examples
s*batch .. s*batch+batch-1 modulo their count. A batch is right-padded to its
longest sequence (causal attention: real tokens never see the padding);
tokens/s counts real tokens only, as loragate counts them.

Needs Debian's python3-torch (apt-get install -y python3-torch); it is not a
dependency of loragate or its CI. Run it with /usr/bin/python3 (Debian's
interpreter, where that package lives). Debian's torch calls the system
libblas.so.3; with the default (netlib reference BLAS) it is far slower than
with OpenBLAS, so train_compare.sh runs it on OpenBLAS (libopenblas0-pthread)
through LD_LIBRARY_PATH.

  /usr/bin/python3 bench/torch_lora_train.py --model DIR --examples FILE \
      [--batch 16] [--steps 4] [--repeats 3] [--threads 2] [--rank 8]
Prints one line per repeat and a last line "median: X tokens/s, Y steps/s".
"""
import argparse
import json
import math
import os
import statistics
import struct
import time

import torch
import torch.nn.functional as F

SAFETENSORS_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}


def read_safetensors(path):
    """name -> float32 tensor, from one .safetensors file (no safetensors package needed)."""
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = bytearray(data[begin:end])
        t = torch.frombuffer(raw, dtype=SAFETENSORS_DTYPES[info["dtype"]]) if raw else torch.empty(0)
        out[name] = t.reshape(info["shape"]).float()
    return out


def load_weights(model_dir):
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(model_dir, "model.safetensors"))
    weights = {}
    with open(index) as f:
        for shard in sorted(set(json.load(f)["weight_map"].values())):
            weights.update(read_safetensors(os.path.join(model_dir, shard)))
    return weights


class Lora:
    """y = x W^T + scaling * (x A^T) B^T, with A, B trainable."""

    def __init__(self, weight, rank, scaling, generator):
        out_features, in_features = weight.shape
        self.weight = weight
        bound = 1.0 / math.sqrt(in_features)
        self.a = (torch.rand(rank, in_features, generator=generator) * 2 - 1).mul_(bound).requires_grad_()
        self.b = torch.zeros(out_features, rank, requires_grad=True)
        self.scaling = scaling

    def __call__(self, x):
        return F.linear(x, self.weight) + F.linear(F.linear(x, self.a), self.b) * self.scaling


def rmsnorm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaLora:
    def __init__(self, model_dir, rank, alpha, seed):
        with open(os.path.join(model_dir, "config.json")) as f:
            c = json.load(f)
        if c.get("rope_scaling"):
            raise SystemExit("rope_scaling is not implemented in this comparison script")
        w = load_weights(model_dir)
        self.hidden = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads", self.heads)
        self.head_dim = c.get("head_dim") or self.hidden // self.heads
        self.eps = c.get("rms_norm_eps", 1e-6)
        theta = c.get("rope_theta", 10000.0)
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim))
        self.embed = w["model.embed_tokens.weight"]
        self.lm_head = w.get("lm_head.weight", self.embed)
        self.final_norm = w["model.norm.weight"]
        generator = torch.Generator().manual_seed(seed)
        scaling = alpha / rank
        self.layers = []
        for i in range(c["num_hidden_layers"]):
            p = f"model.layers.{i}."
            layer = {"input_norm": w[p + "input_layernorm.weight"],
                     "post_norm": w[p + "post_attention_layernorm.weight"]}
            for name in ("q", "k", "v", "o"):
                layer[name] = Lora(w[p + f"self_attn.{name}_proj.weight"], rank, scaling, generator)
            for name in ("gate", "up", "down"):
                layer[name] = Lora(w[p + f"mlp.{name}_proj.weight"], rank, scaling, generator)
            self.layers.append(layer)

    def parameters(self):
        return [t for layer in self.layers for name in ("q", "k", "v", "o", "gate", "up", "down")
                for t in (layer[name].a, layer[name].b)]

    def loss(self, ids, rows, cols, targets):
        """Mean cross-entropy of targets[j] predicted at (rows[j], cols[j]) of the padded batch ids [B, T]."""
        batch, seq = ids.shape
        x = F.embedding(ids, self.embed)
        freqs = torch.outer(torch.arange(seq).float(), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        group = self.heads // self.kv_heads
        for layer in self.layers:
            h = rmsnorm(x, layer["input_norm"], self.eps)
            q = layer["q"](h).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            k = layer["k"](h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
            v = layer["v"](h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
            scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + mask
            attn = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, self.heads * self.head_dim)
            x = x + layer["o"](attn)
            h = rmsnorm(x, layer["post_norm"], self.eps)
            x = x + layer["down"](F.silu(layer["gate"](h)) * layer["up"](h))
        picked = rmsnorm(x[rows, cols], self.final_norm, self.eps)
        return F.cross_entropy(F.linear(picked, self.lm_head), targets)


def make_batch(examples):
    """Right-padded ids [B, T] and the (row, column, target) of every loss target."""
    longest = max(len(e["ids"]) for e in examples)
    ids = torch.zeros(len(examples), longest, dtype=torch.long)
    rows, cols, targets = [], [], []
    for b, e in enumerate(examples):
        ids[b, : len(e["ids"])] = torch.tensor(e["ids"])
        for t in range(1, len(e["ids"])):
            if e["target"][t]:
                rows.append(b)
                cols.append(t - 1)  # position t - 1 predicts the target at t
                targets.append(e["ids"][t])
    return ids, torch.tensor(rows), torch.tensor(cols), torch.tensor(targets), sum(len(e["ids"]) for e in examples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--examples", required=True, help="JSONL {ids, target} from loragate bench train --dump-examples")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=4, help="timed optimizer steps per repeat")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rank", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=7000)
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(1)
    with open(args.examples) as f:
        examples = [json.loads(line) for line in f if line.strip()]
    model = LlamaLora(args.model, args.rank, 2.0 * args.rank, args.seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    print(f"torch {torch.__version__}: model {args.model}, batch {args.batch}, {len(examples)} examples, "
          f"LoRA r {args.rank} on 7 projections, {args.steps} timed steps x {args.repeats} repeats after 1 warm-up, "
          f"{torch.get_num_threads()} threads, BLAS {os.environ.get('LD_LIBRARY_PATH') or 'system libblas.so.3'}",
          flush=True)

    step = 0

    def run_step():
        nonlocal step
        chosen = [examples[(step * args.batch + j) % len(examples)] for j in range(args.batch)]
        step += 1
        ids, rows, cols, targets, tokens = make_batch(chosen)
        optimizer.zero_grad(set_to_none=True)
        loss = model.loss(ids, rows, cols, targets)
        loss.backward()
        optimizer.step()
        return tokens, loss.item()

    _, first_loss = run_step()  # warm-up
    tps, sps = [], []
    last_loss = first_loss
    for rep in range(args.repeats):
        tokens = 0
        start = time.perf_counter()
        for _ in range(args.steps):
            n, last_loss = run_step()
            tokens += n
        seconds = time.perf_counter() - start
        tps.append(tokens / seconds)
        sps.append(args.steps / seconds)
        print(f"repeat {rep + 1}: {tps[-1]:.1f} tokens/s, {sps[-1]:.3f} steps/s", flush=True)
    print(f"loss: {first_loss:.4f} at the warm-up step, {last_loss:.4f} at the last")
    print(f"median: {statistics.median(tps):.2f} tokens/s, {statistics.median(sps):.4f} steps/s")


if __name__ == "__main__":
    main()
