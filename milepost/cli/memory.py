"""``milepost memory``: the memory plan of a training config on N GPUs, before a GPU is rented.

Prints, per rank, the weights, gradients and optimizer state (FSDP2-sharded), the activations of one
micro-batch, the logits, the generator's share (``hf``: a full copy; ``vllm``: ``gpu_memory_utilization`` of
the GPU, the KV cache inside it) and the KV cache, the largest micro-batch that fits, then ``fits`` or the one
line saying what does not. Model shapes come from the ``transformers`` config class (named models carry the
published hyperparameters; a checkpoint folder's ``config.json`` is read, nothing is downloaded). Every row is
taken at full length (prompt + ``agent.max_new_tokens``), the worst case. Exit status 0 when it fits, 1 when it
does not, 2 for bad input.

    milepost memory --config configs/paper/sudoku9_atomic.yaml --model qwen3-8b --gpus 8 --gpu-memory 80GiB \\
        --rollout vllm --set rollout.gpu_memory_utilization=0.3 --micro-batch-tokens 16384
"""

from __future__ import annotations

import argparse

from milepost.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    from milepost.training.config import ROLLOUT_BACKENDS
    from milepost.training.memory import MODELS

    p = sub.add_parser(
        "memory",
        help="memory plan of a training config on N GPUs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", required=True, help="training config (configs/paper/*.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override")
    p.add_argument("--model", default=None, help=f"{' | '.join(MODELS)} or a checkpoint folder (default: the config's)")
    p.add_argument("--gpus", type=int, default=1, help="training ranks (FSDP2), default 1")
    p.add_argument("--gpu-memory", default="80GiB", help="memory of one GPU, e.g. 80GiB, 141GB (default 80GiB)")
    p.add_argument(
        "--rollout",
        choices=ROLLOUT_BACKENDS,
        default=None,
        help=f"generator: {' | '.join(ROLLOUT_BACKENDS)} (default: rollout.backend)",
    )
    p.add_argument("--prompt-tokens", type=int, default=1024, help="prompt tokens per turn (default 1024)")
    p.add_argument("--answer-tokens", type=int, default=None, help="answer tokens (default agent.max_new_tokens)")
    p.add_argument("--turns", type=int, default=None, help="turns per episode (default env.max_steps, the cap)")
    p.add_argument("--micro-batch-tokens", type=int, default=None, help="token budget (default rl.micro_batch_tokens)")
    p.add_argument(
        "--activation-checkpointing",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="recompute layers in backward (default rl.activation_checkpointing)",
    )
    p.add_argument(
        "--logits-chunk-tokens",
        type=int,
        default=None,
        help="positions whose logits exist at once (default: the update's chunk, 512)",
    )
    p.set_defaults(func=run)


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise InputError(f"{name}: must be >= 1, got {value}")


def run(args: argparse.Namespace) -> int:
    from milepost.config import load_config
    from milepost.training.config import TrainConfig
    from milepost.training.memory import Setup, model_shape, parse_bytes, report, workload_from_config

    for name in ("gpus", "prompt_tokens", "answer_tokens", "turns", "micro_batch_tokens", "logits_chunk_tokens"):
        _positive("--" + name.replace("_", "-"), getattr(args, name))
    gpu_memory = parse_bytes(args.gpu_memory)
    cfg = load_config(TrainConfig, args.config, args.overrides)
    shape = model_shape(args.model or cfg.model)
    work = workload_from_config(
        cfg,
        args.gpus,
        args.prompt_tokens,
        turns_per_episode=args.turns,
        answer_tokens=args.answer_tokens,
        micro_batch_tokens=args.micro_batch_tokens,
        activation_checkpointing=args.activation_checkpointing,
        logits_chunk_tokens=args.logits_chunk_tokens,
    )
    setup = Setup(
        gpus=args.gpus,
        gpu_memory=gpu_memory,
        bf16=cfg.bf16,
        rollout=args.rollout or cfg.rollout.backend.partition(":")[0],
        gpu_memory_utilization=cfg.rollout.gpu_memory_utilization,
        max_model_len=cfg.rollout.max_model_len,
    )
    text = report(shape, work, setup)
    print(text)
    return 0 if text.endswith("\nfits") else 1
