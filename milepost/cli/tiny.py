"""``milepost tiny --out DIR``: build a tiny randomly initialised model (tokenizer fitted to the environments'
text) as an ordinary Hugging Face model directory. Nothing is downloaded."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    from milepost.backends.tiny import ARCHS, DEFAULT_VOCAB_SIZE, TINY_PRESETS

    p = sub.add_parser("tiny", help="build a tiny model directory for CPU runs", description=__doc__)
    p.add_argument("--out", required=True, help="model directory to write")
    p.add_argument("--arch", default="qwen3", choices=ARCHS, help="architecture (default qwen3)")
    p.add_argument("--size", default="1m", choices=sorted(TINY_PRESETS), help="size preset (default 1m)")
    p.add_argument("--seed", type=int, default=0, help="seed of the weight initialisation")
    p.add_argument("--vocab-size", type=int, default=DEFAULT_VOCAB_SIZE, help="tokenizer size at most")
    p.add_argument("--max-context", type=int, default=4096, help="context window in tokens")
    p.add_argument("--overwrite", action="store_true", help="replace an existing model directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json

    from milepost.backends.tiny import build_tiny_model

    out = build_tiny_model(
        args.out,
        arch=args.arch,
        size=args.size,
        seed=args.seed,
        vocab_size=args.vocab_size,
        max_context=args.max_context,
        overwrite=args.overwrite,
    )
    meta = json.loads((out / "milepost_tiny.json").read_text(encoding="utf-8"))
    print(f"{out}: {meta['arch']} {meta['size']}, {meta['parameters']:,} parameters, vocabulary {meta['vocab_size']}")
    return 0
