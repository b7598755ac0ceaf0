"""Peak RSS of MiRA's trunk-critic features on a real model: the decoder-trunk path against the full-model path it
replaced (``output_hidden_states`` on the causal LM, which also runs the output head over every prompt position).

Run each path in its own process, since peak RSS only grows (the note on issue 28 of 2026-12-03: SmolLM2 start,
64 prompts of 600 tokens, 2 threads: new 1.99 GB / 92 s, old 13.58 GB / 137 s)::

    python benchmarks/trunk_features_memory.py new --model runs/models/webshop1-smollm2
    python benchmarks/trunk_features_memory.py old --model runs/models/webshop1-smollm2
"""

from __future__ import annotations

import argparse
import resource
import time

import torch
from transformers import AutoModelForCausalLM

from milepost.training.critics import _pad_batch, trunk_features


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", choices=["new", "old"], help="new: trunk_features; old: the full model's hidden states")
    p.add_argument("--model", required=True, help="a causal LM directory")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--tokens", type=int, default=600)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    model = AutoModelForCausalLM.from_pretrained(args.model)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(1, vocab, (args.tokens,), generator=g).tolist() for _ in range(args.prompts)]
    t = time.perf_counter()
    if args.path == "old":
        with torch.no_grad():
            ids, mask = _pad_batch(prompts, 0, torch.device("cpu"))
            feats = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states[-1][:, -1]
    else:
        feats = trunk_features(model, prompts, 0)
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux
    print(f"{args.path}: features {tuple(feats.shape)}, peak RSS {peak_gb:.2f} GB, {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
