#!/usr/bin/env python3
"""PyTorch reference for bench/engine.ts: the same Qwen2-shaped decoder, written plainly in torch
(eager mode, float32, no compile), on the same workloads.

Shapes (issue 3):
  S = hidden 256, 4 layers, 8 heads, 2 kv heads, ffn 768, vocab 512
  M = hidden 512, 8 layers, 8 heads, 2 kv heads, ffn 1536, vocab 2048
Decoder: RMSNorm (eps 1e-6), RoPE (theta 10000, rotate-half), grouped-query attention with q/k/v
biases, SwiGLU MLP, tied input embedding / output head.

Train:  16 x 256 tokens, importance-sampling loss -exp(logp - old_logp) * A averaged over tokens,
        forward + backward + AdamW.
Sample: 32 prompts of 64 tokens, 192 new tokens each, one batch with a preallocated KV cache
        (prefill, then one decode step per token, multinomial sampling at temperature 1);
        and (M only, as bench/engine.ts) one prompt alone.
GFLOPS use bench/engine.ts's formulas: 6 * params * tokens (train), 2 * params * tokens (sample).

Prints one JSON line per workload and ends with one line with bench/engine.ts's keys:
  {"train_tokens_per_s":{"S":n,"M":n},"sample_tokens_per_s":{"S_b32":n,"M_b32":n,"M_b1":n},"peak_rss_mb":n}

  python3 bench/torch_engine.py [--only S|M] [--threads 2] [--quick] [--omp-wait passive|active|default]
  python3 bench/torch_engine.py --peak     # float32 matmul GFLOPS: the machine's practical peak
--peak works with numpy alone when torch is missing.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--only", choices=["S", "M"])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--quick", action="store_true", help="one timed training step instead of two")
ap.add_argument("--peak", action="store_true", help="measure float32 matmul GFLOPS and exit")
ap.add_argument("--peak-n", type=int, default=2048)
ap.add_argument("--seed", type=int, default=0)
ap.add_argument("--omp-wait", choices=["passive", "active", "default"], default="passive",
                help="OpenMP wait policy (default passive: spinning threads lose badly when other processes share the cores)")
args = ap.parse_args()

# Thread pools read these when the library loads, so they are set before importing torch / numpy.
for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(args.threads)
if args.omp_wait != "default":
    os.environ["OMP_WAIT_POLICY"] = args.omp_wait.upper()

SHAPES = {
    "S": dict(hidden=256, layers=4, heads=8, kv_heads=2, ffn=768, vocab=512),
    "M": dict(hidden=512, layers=8, heads=8, kv_heads=2, ffn=1536, vocab=2048),
}
TRAIN_BATCH, TRAIN_LEN = 16, 256
SAMPLE_BATCH, PROMPT_LEN, NEW_TOKENS = 32, 64, 192


def emit(obj):
    out = {k: (round(v, 2) if isinstance(v, float) else v) for k, v in obj.items()}
    print(json.dumps(out, separators=(",", ":")), flush=True)


def peak_rss_mb():
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # Linux: KiB


def measure_peak(n):
    """Best of several rounds of an n x n float32 matmul, in GFLOPS."""
    try:
        import torch

        torch.set_num_threads(args.threads)
        a, b = torch.randn(n, n), torch.randn(n, n)
        mm, via = (lambda: torch.mm(a, b)), f"torch {torch.__version__}"
    except ImportError:
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n), dtype=np.float32)
        b = rng.standard_normal((n, n), dtype=np.float32)
        mm, via = (lambda: a @ b), f"numpy {np.__version__}"
    for _ in range(2):
        mm()
    best = 0.0
    for _ in range(5):
        reps, t0 = 0, time.perf_counter()
        while True:
            mm()
            reps += 1
            dt = time.perf_counter() - t0
            if dt > 0.5:
                break
        best = max(best, 2 * n**3 * reps / dt / 1e9)
    emit({"peak_gflops": best, "threads": args.threads, "matmul_n": n, "via": via})


if args.peak:
    measure_peak(args.peak_n)
    sys.exit(0)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(args.threads)
torch.manual_seed(args.seed)


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(head_dim, max_pos, theta=10000.0):
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(max_pos, dtype=torch.float32), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)  # (max_pos, head_dim)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    # x: (..., T, head_dim); cos, sin: (T, head_dim)
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.h, self.kv = s["heads"], s["kv_heads"]
        self.hd = s["hidden"] // s["heads"]
        self.q_proj = nn.Linear(s["hidden"], self.h * self.hd, bias=True)
        self.k_proj = nn.Linear(s["hidden"], self.kv * self.hd, bias=True)
        self.v_proj = nn.Linear(s["hidden"], self.kv * self.hd, bias=True)
        self.o_proj = nn.Linear(self.h * self.hd, s["hidden"], bias=False)

    def forward(self, x, cos, sin, pos, cache):
        B, T, _ = x.shape
        G = self.h // self.kv
        q = self.q_proj(x).view(B, T, self.h, self.hd).transpose(1, 2)  # (B, H, T, hd)
        k = self.k_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)  # (B, KV, T, hd)
        v = self.v_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        c, s_ = cos[pos:pos + T], sin[pos:pos + T]
        q, k = rotate(q, c, s_), rotate(k, c, s_)
        if cache is not None:
            k_cache, v_cache = cache  # (B, KV, max_len, hd)
            k_cache[:, :, pos:pos + T] = k
            v_cache[:, :, pos:pos + T] = v
            k, v = k_cache[:, :, :pos + T], v_cache[:, :, :pos + T]
        L = k.shape[2]
        # Grouped-query attention: the G query heads sharing a kv head attend together.
        q = q.reshape(B, self.kv, G, T, self.hd)
        scores = torch.matmul(q, k.unsqueeze(2).transpose(-1, -2)) / math.sqrt(self.hd)  # (B, KV, G, T, L)
        if T > 1:
            # query t sits at position pos + t and sees keys 0 .. pos + t
            mask = torch.ones(T, L, dtype=torch.bool).triu(pos + 1)
            scores = scores.masked_fill(mask, float("-inf"))
        out = torch.matmul(scores.softmax(-1), v.unsqueeze(2))  # (B, KV, G, T, hd)
        return self.o_proj(out.reshape(B, self.h, T, self.hd).transpose(1, 2).reshape(B, T, self.h * self.hd))


class MLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.gate_proj = nn.Linear(s["hidden"], s["ffn"], bias=False)
        self.up_proj = nn.Linear(s["hidden"], s["ffn"], bias=False)
        self.down_proj = nn.Linear(s["ffn"], s["hidden"], bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.input_layernorm = RMSNorm(s["hidden"])
        self.self_attn = Attention(s)
        self.post_attention_layernorm = RMSNorm(s["hidden"])
        self.mlp = MLP(s)

    def forward(self, x, cos, sin, pos, cache):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, pos, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Decoder(nn.Module):
    def __init__(self, s, max_pos=2048):
        super().__init__()
        self.s = s
        self.embed_tokens = nn.Embedding(s["vocab"], s["hidden"])
        self.layers = nn.ModuleList([Layer(s) for _ in range(s["layers"])])
        self.norm = RMSNorm(s["hidden"])
        cos, sin = rope_tables(s["hidden"] // s["heads"], max_pos)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, tokens, pos=0, caches=None, last_only=False):
        x = self.embed_tokens(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, self.cos, self.sin, pos, caches[i] if caches is not None else None)
        if last_only:
            x = x[:, -1:]
        return self.norm(x) @ self.embed_tokens.weight.t()  # tied head

    def new_caches(self, batch, max_len):
        s = self.s
        shape = (batch, s["kv_heads"], max_len, s["hidden"] // s["heads"])
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in range(s["layers"])]


def param_count(s):
    """As src/model/config.ts parameterCount: tied embedding counted once, q/k/v biases included."""
    h, hd = s["hidden"], s["hidden"] // s["heads"]
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    attn = h * q + 2 * h * kv + q * h + q + 2 * kv
    layer = attn + 3 * h * s["ffn"] + 2 * h
    return s["layers"] * layer + h + s["vocab"] * h


def time_it(fn, reps, warmups=1):
    for _ in range(warmups):  # untimed: allocator and caches
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def random_tokens(gen, shape, vocab):
    return torch.randint(3, vocab, shape, generator=gen)


@torch.inference_mode()
def sample(model, prompts, new_tokens):
    B, P = prompts.shape
    caches = model.new_caches(B, P + new_tokens)
    logits = model(prompts, 0, caches, last_only=True)[:, -1]
    out = []
    for step in range(new_tokens):
        nxt = torch.multinomial(logits.softmax(-1), 1)  # (B, 1)
        out.append(nxt)
        if step + 1 < new_tokens:
            logits = model(nxt, P + step, caches)[:, -1]
    return torch.cat(out, dim=1)


def main():
    emit({"workload": "info", "framework": "torch", "torch_version": torch.__version__, "threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default")})
    summary = {"train_tokens_per_s": {}, "sample_tokens_per_s": {}, "peak_rss_mb": 0}
    for name, s in SHAPES.items():
        if args.only and args.only != name:
            continue
        model = Decoder(s)
        params = param_count(s)
        assert params == sum(p.numel() for p in model.parameters()), "parameter count differs from the engine's formula"
        gen = torch.Generator().manual_seed(7)

        seq = random_tokens(gen, (TRAIN_BATCH, TRAIN_LEN + 1), s["vocab"])
        inputs, targets = seq[:, :-1], seq[:, 1:]
        advantages = torch.randn(TRAIN_BATCH, TRAIN_LEN, generator=gen)
        old_logp = torch.full((TRAIN_BATCH, TRAIN_LEN), -math.log(s["vocab"]))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)

        def train_step():
            logp = model(inputs).log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            loss = -(torch.exp(logp - old_logp) * advantages).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        train_s = time_it(train_step, 1 if args.quick else 3, 2)
        tokens = TRAIN_BATCH * TRAIN_LEN
        emit({"workload": f"train_{name}", "tokens_per_s": tokens / train_s, "gflops": 6 * params * tokens / train_s / 1e9, "seconds": train_s, "rss_mb": peak_rss_mb()})
        summary["train_tokens_per_s"][name] = round(tokens / train_s, 1)
        del opt

        prompts = random_tokens(gen, (SAMPLE_BATCH, PROMPT_LEN), s["vocab"])
        b32_s = time_it(lambda: sample(model, prompts, NEW_TOKENS), 1)
        tokens = SAMPLE_BATCH * NEW_TOKENS
        emit({"workload": f"sample_{name}_b32", "tokens_per_s": tokens / b32_s, "gflops": 2 * params * tokens / b32_s / 1e9, "seconds": b32_s, "rss_mb": peak_rss_mb()})
        summary["sample_tokens_per_s"][f"{name}_b32"] = round(tokens / b32_s, 1)
        if name == "M":
            b1_s = time_it(lambda: sample(model, prompts[:1], NEW_TOKENS), 1)
            emit({"workload": f"sample_{name}_b1", "tokens_per_s": NEW_TOKENS / b1_s, "gflops": 2 * params * NEW_TOKENS / b1_s / 1e9, "seconds": b1_s, "rss_mb": peak_rss_mb()})
            summary["sample_tokens_per_s"]["M_b1"] = round(NEW_TOKENS / b1_s, 1)
    summary["peak_rss_mb"] = peak_rss_mb()
    print(json.dumps(summary, separators=(",", ":")), flush=True)


main()
