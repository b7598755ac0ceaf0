"""One minibatch step of the trainer's own ``update`` at the paper config's shapes, on this CPU.

A random-init Qwen3 of width 64 and 2 layers (``transformers.Qwen3Config``) with Qwen3's vocabulary of 151,936
tokens takes one optimizer step on turns shaped like ``configs/paper/sudoku9_atomic.yaml``'s: prompts of
about 1,000 tokens (a 9x9 grid, K = 2 turns of memory), answers up to ``agent.max_new_tokens`` = 2,048 (a
quarter of the rows at the cap, a quarter short, the rest spread between). Under ``torchrun`` the turns are
split over the ranks by FSDP2, as in ``milepost train``. Each rank writes ``OUT.rankR.json``: its peak RSS
(``ru_maxrss``) before and after the step, the step's statistics and its forward count; rank 0 also writes
the updated parameters to ``OUT`` when ``--save`` is given.

    python tests/rehearsal/rehearsal_step.py OUT --turns 8 --micro 4096
    torchrun --standalone --nproc_per_node 2 tests/rehearsal/rehearsal_step.py OUT --turns 16 --micro 4096

``--micro -1`` leaves ``rl.micro_batch_tokens`` unset, so the script also runs against a checkout from before
it existed (the one-shot update, for the memory comparison).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
from typing import Any

import torch

VOCAB = 151_936
PROMPT = (900, 1100)
MAX_ANSWER = 2048
TURNS_PER_STEP = 1664
"""configs/paper/sudoku9_atomic.yaml: 32 tasks x 4 samples x 26 turns (an oracle L3-L4 episode) / 2 minibatches"""


def build_model(vocab: int = VOCAB, seed: int = 0) -> Any:
    """A random-init Qwen3 of width 64 and 2 layers (the same weights on every rank: seeded)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=32,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config).float()


def turns(n: int, max_answer: int, vocab: int = VOCAB, seed: int = 0, capped: bool = False) -> list[Any]:
    """``n`` turns of paper shape: prompts of 900-1,100 tokens; a quarter of the answers at ``max_answer`` (the
    length cap), a quarter short (16-128 tokens, an atomic move), the rest anywhere in between."""
    from milepost.training.trainer import TurnSample

    rng = random.Random(seed)
    out = []
    for i in range(n):
        prompt = [rng.randrange(3, vocab) for _ in range(rng.randint(*PROMPT))]
        length = (max_answer, rng.randint(16, 128), rng.randint(16, max_answer), rng.randint(16, max_answer))[i % 4]
        length = max_answer if capped else length
        answer = [rng.randrange(3, vocab) for _ in range(length)]
        # Behaviour log-probs near a random-init model's (about -log V); Geo-MIS off so no turn is masked out.
        out.append(TurnSample(prompt, answer, [-12.0] * length, rng.gauss(0.0, 1.0)))
    return out


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--turns", type=int, default=16)
    p.add_argument("--micro", type=int, default=4096, help="rl.micro_batch_tokens (-1: leave unset)")
    p.add_argument("--max-answer", type=int, default=MAX_ANSWER)
    p.add_argument("--vocab", type=int, default=VOCAB)
    p.add_argument("--capped", action="store_true", help="every answer at --max-answer (the memory comparison)")
    p.add_argument("--optimizer", default="adamw", choices=("adamw", "sgd"))
    p.add_argument("--save", action="store_true", help="rank 0 writes the updated parameters to OUT")
    args = p.parse_args(argv)
    torch.set_num_threads(1)

    from milepost.distributed.fsdp import setup
    from milepost.training.config import RLConfig, TrainConfig
    from milepost.training.trainer import update

    extra = {} if args.micro < 0 else {"micro_batch_tokens": args.micro}
    rl = RLConfig(minibatches=1, lr=1e-6, is_mask=False, **extra)  # type: ignore[arg-type]
    cfg = TrainConfig(name="rehearsal", data="unused", rl=rl, device="cpu")
    model = build_model(args.vocab)
    samples = turns(args.turns, args.max_answer, args.vocab, capped=args.capped)
    fsdp = setup(cfg)
    if fsdp is not None:
        model = fsdp.shard(model)
    forwards = [0]
    model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    if args.optimizer == "sgd":
        optimizer: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr)
    before = peak_rss_mb()
    stats = update(model, optimizer, samples, cfg, 0, random.Random(1), fsdp=fsdp)
    rank = fsdp.rank if fsdp is not None else 0
    record = {"rank": rank, "rss_before_mb": before, "rss_peak_mb": peak_rss_mb(), "forwards": forwards[0]}
    with open(f"{args.out}.rank{rank}.json", "w") as f:
        json.dump({**record, "stats": stats}, f)
    if args.save:
        state = fsdp.full_state_dict(model) if fsdp is not None else model.state_dict()
        if rank == 0:
            torch.save({k: v.detach().clone() for k, v in state.items()}, args.out)
    if fsdp is not None:
        fsdp.close()


if __name__ == "__main__":
    main()
