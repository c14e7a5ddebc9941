#!/usr/bin/env python3
"""PyTorch reference for bench/engine.ts: the same Qwen2-shaped decoder, written plainly in torch
(eager mode, float32, no compile), on the same workloads.

Shapes (bench/engine.ts's):
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

--model qwen2.5-0.5b|qwen2.5-1.5b|qwen3-4b (bench/engine.ts --model ...): the model's shapes (Qwen2.5-0.5B:
hidden 896, 24 layers, 14 heads, 2 kv heads, ffn 4864, q/k/v biases; Qwen2.5-1.5B: hidden 1536, 28 layers,
12 heads, 2 kv heads, ffn 8960, biases; Qwen3-4B: hidden 2560, 36 layers, 32 heads of 128, 8 kv heads, ffn
9728, no biases, per-head q/k RMSNorm before RoPE; vocab 151936, tied head, RoPE theta 1e6), random base weights (N(0, 0.02))
held in bfloat16 (--dtype float32 for a float32 model) and frozen, computed in that dtype as transformers
does (RMSNorm and attention softmax in float32, float32 logits). A LoRA by hand on q, k, v, o, gate, up,
down of every layer: float32 A (32, in) and B (out, 32), PEFT's init, y = x W^T + b + (32 / 32) (x A^T) B^T;
AdamW over A and B only.
  sample_b32: 32 prompts of 64 random tokens, 64 new tokens each, one batch with a KV cache (after a
              small warm-up on other prompts); sample_b1: one other prompt alone. Tokens/s counts new tokens.
  lora_train: 4 x 256 tokens, the importance-sampling loss above, forward + backward + AdamW step,
              one untimed step then the mean of two (--quick: one).
Ends with {KEY:{"sample_b32":n,"sample_b1":n,"lora_train":n},"peak_rss_mb":n}, KEY qwen05b, qwen15b or qwen3_4b.

  python3 bench/torch_engine.py [--only S|M] [--threads 2] [--quick] [--omp-wait passive|active|default]
  python3 bench/torch_engine.py --model qwen2.5-0.5b|qwen2.5-1.5b|qwen3-4b [--dtype bfloat16|float32] [--threads 2] [--quick]
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
ap.add_argument("--model", choices=["qwen2.5-0.5b", "qwen2.5-1.5b", "qwen3-4b"],
                help="a real model's shapes with a LoRA instead of S and M")
ap.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16",
                help="--model: the base weights' dtype and the compute's (default bfloat16, as the checkpoint)")
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
    """As src/model/config.ts parameterCount: tied embedding counted once, q/k/v biases (when the model
    has them) and q/k norms (Qwen3) included."""
    h, hd = s["hidden"], s.get("head_dim", s["hidden"] // s["heads"])
    q, kv = s["heads"] * hd, s["kv_heads"] * hd
    attn = h * q + 2 * h * kv + q * h + (q + 2 * kv if s.get("bias", True) else 0) + (2 * hd if s.get("qk_norm") else 0)
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


# ---------------------------------------------------------------- --model NAME

# Each model's key in the output and its shapes (bench/qwen-model.ts REAL_MODELS has the config.json files).
_QWEN = dict(vocab=151936, theta=1000000.0, eps=1e-6)
REAL_MODELS = {
    "qwen2.5-0.5b": ("qwen05b", dict(_QWEN, hidden=896, layers=24, heads=14, kv_heads=2, head_dim=64, ffn=4864, bias=True, qk_norm=False)),
    "qwen2.5-1.5b": ("qwen15b", dict(_QWEN, hidden=1536, layers=28, heads=12, kv_heads=2, head_dim=128, ffn=8960, bias=True, qk_norm=False)),
    "qwen3-4b": ("qwen3_4b", dict(_QWEN, hidden=2560, layers=36, heads=32, kv_heads=8, head_dim=128, ffn=9728, bias=False, qk_norm=True)),
}
LORA_RANK, LORA_ALPHA = 32, 32
MODEL_TRAIN_BATCH, MODEL_TRAIN_LEN = 4, 256
MODEL_SAMPLE_BATCH, MODEL_PROMPT_LEN, MODEL_NEW_TOKENS = 32, 64, 64


def fill_normal(t, std, gen):
    """t (any dtype) filled with N(0, std) drawn in float32 chunks: no float32 copy of a whole matrix."""
    flat, step = t.view(-1), 1 << 22
    for i in range(0, flat.numel(), step):
        j = min(i + step, flat.numel())
        flat[i:j] = torch.randn(j - i, generator=gen) * std
    return t


class LoraLinear(nn.Module):
    """Frozen base weight (out, in) and bias in `dtype`; trained float32 A (r, in) and B (out, r), as PEFT
    keeps them: y = x W^T + b + (alpha / r) (x A^T) B^T, the adapter branch computed in float32."""

    def __init__(self, inp, out, bias, dtype, gen):
        super().__init__()
        self.weight = nn.Parameter(fill_normal(torch.empty(out, inp, dtype=dtype), 0.02, gen), requires_grad=False)
        self.bias = nn.Parameter(fill_normal(torch.empty(out, dtype=dtype), 0.02, gen), requires_grad=False) if bias else None
        bound = 1 / math.sqrt(inp)  # PEFT's defaults: A uniform, B zero
        self.lora_A = nn.Parameter(torch.empty(LORA_RANK, inp).uniform_(-bound, bound, generator=gen))
        self.lora_B = nn.Parameter(torch.zeros(out, LORA_RANK))
        self.scale = LORA_ALPHA / LORA_RANK

    def forward(self, x):
        y = F.linear(x, self.weight, self.bias)
        return y + (F.linear(F.linear(x.float(), self.lora_A), self.lora_B) * self.scale).to(y.dtype)


class Norm(nn.Module):
    """RMSNorm computed in float32, as transformers' Qwen2RMSNorm."""

    def __init__(self, dim, eps, dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype), requires_grad=False)
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        return self.weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class LoraLayer(nn.Module):
    def __init__(self, s, dtype, gen):
        super().__init__()
        h, f = s["hidden"], s["ffn"]
        self.h, self.kv, self.hd = s["heads"], s["kv_heads"], s["head_dim"]
        self.input_layernorm = Norm(h, s["eps"], dtype)
        self.q_proj = LoraLinear(h, self.h * self.hd, s["bias"], dtype, gen)
        self.k_proj = LoraLinear(h, self.kv * self.hd, s["bias"], dtype, gen)
        self.v_proj = LoraLinear(h, self.kv * self.hd, s["bias"], dtype, gen)
        # Qwen3: RMSNorm of each head's query and key (weights of head_dim) before RoPE
        self.q_norm = Norm(self.hd, s["eps"], dtype) if s["qk_norm"] else None
        self.k_norm = Norm(self.hd, s["eps"], dtype) if s["qk_norm"] else None
        self.o_proj = LoraLinear(self.h * self.hd, h, False, dtype, gen)
        self.post_attention_layernorm = Norm(h, s["eps"], dtype)
        self.gate_proj = LoraLinear(h, f, False, dtype, gen)
        self.up_proj = LoraLinear(h, f, False, dtype, gen)
        self.down_proj = LoraLinear(f, h, False, dtype, gen)

    def attention(self, x, cos, sin, pos, cache):
        B, T, _ = x.shape
        G = self.h // self.kv
        q = self.q_proj(x).view(B, T, self.h, self.hd)
        k = self.k_proj(x).view(B, T, self.kv, self.hd)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv, self.hd).transpose(1, 2)
        c, s_ = cos[pos:pos + T], sin[pos:pos + T]
        q, k = rotate(q, c, s_), rotate(k, c, s_)
        if cache is not None:
            k_cache, v_cache = cache
            k_cache[:, :, pos:pos + T] = k
            v_cache[:, :, pos:pos + T] = v
            k, v = k_cache[:, :, :pos + T], v_cache[:, :, :pos + T]
        L = k.shape[2]
        q = q.reshape(B, self.kv, G, T, self.hd)
        scores = torch.matmul(q, k.unsqueeze(2).transpose(-1, -2)) / math.sqrt(self.hd)
        if T > 1:
            scores = scores.masked_fill(torch.ones(T, L, dtype=torch.bool).triu(pos + 1), float("-inf"))
        probs = scores.softmax(-1, dtype=torch.float32).to(q.dtype)  # float32 softmax, as transformers' eager attention
        out = torch.matmul(probs, v.unsqueeze(2))
        return self.o_proj(out.reshape(B, self.h, T, self.hd).transpose(1, 2).reshape(B, T, self.h * self.hd))

    def forward(self, x, cos, sin, pos, cache):
        x = x + self.attention(self.input_layernorm(x), cos, sin, pos, cache)
        y = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))


class LoraDecoder(nn.Module):
    """The decoder with frozen base weights in `dtype` and rank-32 LoRA on q, k, v, o, gate, up, down."""

    def __init__(self, s, dtype, gen, max_pos):
        super().__init__()
        self.s, self.dtype = s, dtype
        self.embed_tokens = nn.Embedding(s["vocab"], s["hidden"], dtype=dtype)
        self.embed_tokens.weight.requires_grad_(False)
        with torch.no_grad():
            fill_normal(self.embed_tokens.weight, 0.02, gen)
        self.layers = nn.ModuleList([LoraLayer(s, dtype, gen) for _ in range(s["layers"])])
        self.norm = Norm(s["hidden"], s["eps"], dtype)
        cos, sin = rope_tables(s["head_dim"], max_pos, s["theta"])
        self.register_buffer("cos", cos.to(dtype), persistent=False)
        self.register_buffer("sin", sin.to(dtype), persistent=False)

    def forward(self, tokens, pos=0, caches=None, last_only=False):
        x = self.embed_tokens(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, self.cos, self.sin, pos, caches[i] if caches is not None else None)
        if last_only:
            x = x[:, -1:]
        return F.linear(self.norm(x), self.embed_tokens.weight).float()  # tied head; float32 logits

    def new_caches(self, batch, max_len):
        s = self.s
        shape = (batch, s["kv_heads"], max_len, s["head_dim"])
        return [(torch.zeros(shape, dtype=self.dtype), torch.zeros(shape, dtype=self.dtype)) for _ in range(s["layers"])]


def model_main():
    key, s = REAL_MODELS[args.model]
    dtype = getattr(torch, args.dtype)
    emit({"workload": "info", "framework": "torch", "torch_version": torch.__version__, "threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default"), "model": args.model, "dtype": args.dtype})
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.perf_counter()
    model = LoraDecoder(s, dtype, gen, max_pos=max(MODEL_PROMPT_LEN + MODEL_NEW_TOKENS, MODEL_TRAIN_LEN))
    params = param_count(s)
    base = sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert params == base, "parameter count differs from the engine's formula"
    lora = [p for p in model.parameters() if p.requires_grad]
    emit({"workload": f"{key}_init", "seconds": time.perf_counter() - t0, "params": params, "lora_params": sum(p.numel() for p in lora), "rss_mb": peak_rss_mb()})
    figures = {}
    tgen = torch.Generator().manual_seed(7)

    sample(model, random_tokens(tgen, (2, MODEL_PROMPT_LEN), s["vocab"]), 4)  # warm-up
    prompts = random_tokens(tgen, (MODEL_SAMPLE_BATCH, MODEL_PROMPT_LEN), s["vocab"])
    t0 = time.perf_counter()
    sample(model, prompts, MODEL_NEW_TOKENS)
    sec, tokens = time.perf_counter() - t0, MODEL_SAMPLE_BATCH * MODEL_NEW_TOKENS
    emit({"workload": f"{key}_sample_b32", "tokens_per_s": tokens / sec, "gflops": 2 * params * tokens / sec / 1e9, "seconds": sec, "rss_mb": peak_rss_mb()})
    figures["sample_b32"] = round(tokens / sec, 1)

    t0 = time.perf_counter()
    sample(model, random_tokens(tgen, (1, MODEL_PROMPT_LEN), s["vocab"]), MODEL_NEW_TOKENS)
    sec, tokens = time.perf_counter() - t0, MODEL_NEW_TOKENS
    emit({"workload": f"{key}_sample_b1", "tokens_per_s": tokens / sec, "gflops": 2 * params * tokens / sec / 1e9, "seconds": sec, "rss_mb": peak_rss_mb()})
    figures["sample_b1"] = round(tokens / sec, 1)

    seq = random_tokens(tgen, (MODEL_TRAIN_BATCH, MODEL_TRAIN_LEN + 1), s["vocab"])
    inputs, targets = seq[:, :-1], seq[:, 1:]
    advantages = torch.randn(MODEL_TRAIN_BATCH, MODEL_TRAIN_LEN, generator=tgen)
    old_logp = torch.full((MODEL_TRAIN_BATCH, MODEL_TRAIN_LEN), -math.log(s["vocab"]))
    opt = torch.optim.AdamW(lora, lr=1e-5, weight_decay=0.0)

    def train_step():
        logp = model(inputs).log_softmax(-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        loss = -(torch.exp(logp - old_logp) * advantages).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    sec = time_it(train_step, 1 if args.quick else 2, 1)
    tokens = MODEL_TRAIN_BATCH * MODEL_TRAIN_LEN
    # Frozen base: forward and the input gradients, about 4 * params flops a token.
    emit({"workload": f"{key}_lora_train", "tokens_per_s": tokens / sec, "gflops": 4 * params * tokens / sec / 1e9, "seconds": sec, "rss_mb": peak_rss_mb()})
    figures["lora_train"] = round(tokens / sec, 1)
    print(json.dumps({key: figures, "peak_rss_mb": peak_rss_mb()}, separators=(",", ":")), flush=True)


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


if args.model:
    model_main()
else:
    main()
