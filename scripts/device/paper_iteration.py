"""One paper-config RL iteration on a lent GPU: generation and the trainer's own update of a random-init Qwen3.

For the day a GPU is lent: builds Qwen3-architecture models at 0.6B and 1.7B parameters from the config class
(``transformers.Qwen3Config`` with the shapes of the published Qwen3-0.6B / Qwen3-1.7B ``config.json``; random
weights, nothing downloaded), in bf16, and runs the work of one iteration of ``configs/paper/sudoku9_*``:

* the workload comes from this project: the config's batch (tasks x samples), minibatches and turn budget, and
  the prompt and answer lengths of a 9x9 episode played by the oracle through the real agent loop at the
  config's renderer and memory, counted with Qwen3's pre-tokenizer (each piece is at least one BPE token, so a
  slight undercount);
* generation: vLLM when it is installed and a GPU is present (prompt token ids in, ``ignore_eos`` so every row
  generates the full answer length), else ``model.generate``;
* update: the trainer's own ``milepost.training.trainer.update`` (M minibatch steps of AdamW, micro-batches of
  ``rl.micro_batch_tokens`` accumulated, the chunked log-probs, bf16 autocast on a GPU); under ``torchrun``
  with several processes the model is sharded by ``milepost.distributed.fsdp`` as ``milepost train`` shards it;
* printed: tokens/s of generation and of the update, the update's share of the iteration, and MFU against the
  GPU's dense bf16 peak. The FLOPs count the output head (V x H) only on the tokens that run through it: the
  answer tokens (the update's forward keeps the logits of those alone; generation's prefill runs the head on
  one position per row); the decoder body runs on every token; 3x the forward for the update, attention left out.

Measured turns are few (``--turns``); the full iteration's time is extrapolated by the config's turn count.
Run it from the repository root as a module; it needs what ``pip install -e .[ml]`` installs (vLLM optional).
``--tiny`` runs it at a tiny size on CPU in seconds (tested in the default suite), so that it works the first
time it meets a GPU:

    python -m scripts.device.paper_iteration --sizes 0.6b,1.7b --json out.json
    torchrun --nproc_per_node 8 -m scripts.device.paper_iteration --sizes 1.7b
    python -m scripts.device.paper_iteration --tiny
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

# Shapes of the published Qwen3 configs (huggingface.co/Qwen/Qwen3-0.6B and Qwen3-1.7B, config.json).
QWEN3_SHAPES: dict[str, dict[str, Any]] = {
    "0.6b": {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16},
    "1.7b": {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16},
    "tiny": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2},
}
QWEN3_COMMON = {"num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True}
TINY_COMMON = {"num_key_value_heads": 1, "head_dim": 32, "vocab_size": 512, "tie_word_embeddings": True}
# Dense bf16 tensor-core peaks from NVIDIA's datasheets (TFLOP/s, without sparsity).
PEAK_TFLOPS = {"H200": 989.4, "H100 SXM": 989.4, "H100 PCIe": 756.0, "H100": 989.4, "A100": 312.0, "L40S": 362.1}


@dataclass
class Workload:
    """One iteration's shape, from a paper config and an oracle episode at its settings."""

    episodes: int
    minibatches: int
    turns: int
    """turns per episode in a full iteration (the config's level's mean goal distance for atomic actions)"""
    prompt_tokens: int
    answer_tokens: int
    source: str


def qwen3_pieces(text: str) -> int:
    """Qwen2 / Qwen3 pre-tokenizer pieces of ``text`` (digits one by one): a lower bound of its token count."""
    import regex

    pattern = (
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|"
        r"\s+(?!\S)|\s+"
    )
    return len(regex.findall(pattern, text))


def chat_pieces(messages: list[dict[str, str]]) -> int:
    """Pieces of the Qwen3 chat rendering: <|im_start|>role\\n content <|im_end|>\\n per message, plus the
    assistant header (each special token one)."""
    return sum(3 + qwen3_pieces(m["role"] + "\n" + m["content"]) for m in messages) + 3


def paper_workload(config: Path) -> Workload:
    """The iteration of ``config`` (a configs/paper file): batch and M from its rl block, prompt and answer
    lengths from one oracle episode played at its env and agent settings."""
    from milepost.agent.loop import AgentSettings, Job, run_episodes
    from milepost.backends.base import parse_policy_spec
    from milepost.backends.scripted import scripted_policy
    from milepost.config import load_config
    from milepost.envs import make_env
    from milepost.envs.levels import parse_levels
    from milepost.envs.sudoku import make_task
    from milepost.envs.sudoku.generator import generate_easy
    from milepost.training.config import TrainConfig

    cfg = load_config(TrainConfig, str(config), [])
    assert isinstance(cfg, TrainConfig)
    levels = parse_levels(cfg.levels or "L3-L4", cfg.env.name, cfg.env.size)
    distance = round(sum((lv.lo + lv.hi) / 2 for lv in levels) / len(levels))
    task = make_task(*generate_easy(cfg.env.size, distance, cfg.seed, 0), level=levels[0].name, split="train", index=0)
    oracle = scripted_policy(parse_policy_spec("oracle"))
    prompts: list[int] = []
    answers: list[int] = []

    class Recorder:
        name = "oracle"
        scripted = True

        def act(self, episodes: Any) -> Any:
            prompts.extend(chat_pieces(ep.messages()) for ep in episodes)
            out = oracle.act(episodes)
            answers.extend(qwen3_pieces(c.text) + 1 for c in out)  # + <|im_end|>
            return out

    kwargs = {**cfg.env.env_kwargs(), "size": cfg.env.size}
    settings = AgentSettings(memory_k=cfg.agent.memory_k)
    run_episodes(lambda: make_env(cfg.env.name, **kwargs), [Job(task, 0)], Recorder(), settings, progress=False)
    return Workload(
        episodes=cfg.rl.tasks_per_iter * cfg.rl.samples_per_task,
        minibatches=cfg.rl.minibatches,
        turns=len(prompts),
        prompt_tokens=round(sum(prompts) / len(prompts)),
        answer_tokens=round(sum(answers) / len(answers)),
        source=f"{config} ({cfg.env.name} {cfg.env.size}x{cfg.env.size}, render {cfg.env.render}, "
        f"K={cfg.agent.memory_k}, goal distance {distance}, oracle episode of {len(prompts)} turns)",
    )


def build_model(size: str, device: torch.device, dtype: torch.dtype) -> Any:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    common = TINY_COMMON if size == "tiny" else QWEN3_COMMON
    config = Qwen3Config(**QWEN3_SHAPES[size], **common, max_position_embeddings=40960, rope_theta=1_000_000.0)
    with torch.device(device):
        model = Qwen3ForCausalLM(config)
    return model.to(dtype)


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    for key, value in PEAK_TFLOPS.items():
        if all(part in name for part in key.split()):
            return value
    return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def generate(model: Any, rows: list[list[int]], new_tokens: int, device: torch.device, engine: str) -> float:
    """Seconds to generate ``new_tokens`` after each row (every row to full length)."""
    if engine == "vllm":
        import tempfile

        from vllm import LLM, SamplingParams
        from vllm.inputs import TokensPrompt

        with tempfile.TemporaryDirectory() as folder:
            model.save_pretrained(folder)
            llm = LLM(model=folder, skip_tokenizer_init=True, dtype="bfloat16", gpu_memory_utilization=0.45, seed=0)
            params = SamplingParams(max_tokens=new_tokens, min_tokens=new_tokens, ignore_eos=True, detokenize=False)
            llm.generate([TokensPrompt(prompt_token_ids=rows[0])], params)  # warm-up (graphs, caches)
            start = time.perf_counter()
            llm.generate([TokensPrompt(prompt_token_ids=r) for r in rows], params)
            seconds = time.perf_counter() - start
            del llm
        return seconds
    ids = torch.tensor(rows, device=device)
    model.eval()
    with torch.no_grad():
        _sync(device)
        start = time.perf_counter()
        model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=False, pad_token_id=0)  # fmt: skip
        _sync(device)
    return time.perf_counter() - start


def head_parameters(model: Any) -> int:
    """Parameters of the output head's matrix (V x H; counted once with tied embeddings)."""
    head = model.get_output_embeddings()
    return int(head.weight.numel())


def update_flops(params: int, head: int, prompt: int, answer: int, rows: int) -> float:
    """Forward + backward FLOPs of the update: the body (all but the embedding / head matrix) on every token,
    the head on the answer tokens only (the trainer keeps the logits of those alone)."""
    body = params - head
    return 6.0 * rows * (body * (prompt + answer) + head * answer)


def generate_flops(params: int, head: int, prompt: int, answer: int, rows: int) -> float:
    """Forward FLOPs of generation: the body on the prompt and every generated token, the head on each
    generated token (the prefill's last position produces the first)."""
    body = params - head
    return 2.0 * rows * (body * (prompt + answer) + head * answer)


def trainer_updates(
    model: Any, rows: list[list[int]], answers: list[list[int]], work: Workload, args: argparse.Namespace
) -> tuple[float, dict[str, float]]:
    """Seconds for the M minibatch steps of the trainer's own ``update`` over the rows, and its statistics."""
    import random

    from milepost.distributed.fsdp import setup
    from milepost.training.config import RLConfig, TrainConfig
    from milepost.training.trainer import TurnSample, update

    device = next(model.parameters()).device
    rl = RLConfig(
        minibatches=work.minibatches,
        lr=1e-6,
        is_mask=False,  # random weights: behaviour log-probs are a stand-in, no turn is masked out
        micro_batch_tokens=args.micro_batch_tokens,
        activation_checkpointing=args.activation_checkpointing,
    )
    cfg = TrainConfig(name="paper-iteration", data="unused", rl=rl, bf16=device.type == "cuda", device=device.type)
    model = model.float()  # float32 master weights; bf16 compute by autocast (or FSDP's mixed precision)
    if cfg.rl.activation_checkpointing:
        from milepost.training.trainer import enable_activation_checkpointing

        enable_activation_checkpointing(model)
    fsdp = setup(cfg)  # None at one process; under torchrun the shards milepost train uses
    if fsdp is not None:
        model = fsdp.shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.rl.lr)
    gen = random.Random(0)
    vocab = model.config.vocab_size
    samples = [TurnSample(r, a, [-math.log(vocab)] * len(a), gen.gauss(0.0, 1.0)) for r, a in zip(rows, answers)]
    _sync(device)
    start = time.perf_counter()
    stats = update(model, optimizer, samples, cfg, 0, random.Random(1), fsdp=fsdp)
    _sync(device)
    return time.perf_counter() - start, stats


def run_size(size: str, work: Workload, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    torch.manual_seed(0)
    model = build_model(size, device, torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
    head = head_parameters(model)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    rows_per_turn = args.episodes or work.episodes
    prompt = args.prompt_tokens or work.prompt_tokens
    answer = args.new_tokens or work.answer_tokens
    rows = [torch.randint(3, vocab, (prompt,), generator=gen).tolist() for _ in range(rows_per_turn)]
    engine = "vllm" if args.engine == "auto" and device.type == "cuda" and _has_vllm() else args.engine
    engine = "hf" if engine == "auto" else engine
    gen_s = sum(generate(model, rows, answer, device, engine) for _ in range(args.turns))
    answers = [torch.randint(3, vocab, (answer,), generator=gen).tolist() for _ in range(rows_per_turn * args.turns)]
    upd_s, stats = trainer_updates(model, rows * args.turns, answers, work, args)
    n_rows = rows_per_turn * args.turns
    generated = n_rows * answer
    trained = n_rows * (prompt + answer)
    # Under torchrun every rank generates its own rows (time per GPU) and trains its share of the whole (the
    # update's FLOPs are spread over all of them).
    world = int(os.environ.get("WORLD_SIZE", "1"))
    peak = peak_tflops(device, args.peak_tflops)
    scale = work.turns / args.turns
    out = {
        "size": size,
        "parameters": params,
        "head_parameters": head,
        "engine": engine,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "rows_per_turn": rows_per_turn,
        "prompt_tokens": prompt,
        "answer_tokens": answer,
        "turns_measured": args.turns,
        "micro_batch_tokens": args.micro_batch_tokens,
        "micro_steps": stats["micro_steps"],
        "generate_s": gen_s,
        "update_s": upd_s,
        "generate_tokens_per_s": generated / gen_s,
        "update_tokens_per_s": trained / upd_s,
        "update_share": upd_s / (gen_s + upd_s),
        "iteration_s_extrapolated": (gen_s + upd_s) * scale,
        "peak_tflops": peak,
        "mfu_generate": generate_flops(params, head, prompt, answer, n_rows) / gen_s / (peak * 1e12) if peak else None,
        "mfu_update": update_flops(params, head, prompt, answer, n_rows) / upd_s / (peak * 1e12 * world)
        if peak
        else None,
    }
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def _has_vllm() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="0.6b,1.7b", help="comma list of: " + ", ".join(QWEN3_SHAPES))
    p.add_argument("--config", default=str(Path(__file__).resolve().parents[2] / "configs/paper/sudoku9_atomic.yaml"))
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--engine", default="auto", choices=("auto", "hf", "vllm"), help="generation (auto: vllm on GPU)")
    p.add_argument("--turns", type=int, default=2, help="turns measured (the iteration is extrapolated)")
    p.add_argument("--episodes", type=int, default=0, help="rows per turn (default: the config's batch)")
    p.add_argument("--prompt-tokens", type=int, default=0, help="default: measured from the config's episode")
    p.add_argument("--new-tokens", type=int, default=0, help="default: measured from the config's episode")
    p.add_argument("--micro-batch-tokens", type=int, default=8192, help="rl.micro_batch_tokens of the update")
    p.add_argument("--activation-checkpointing", action="store_true", help="rl.activation_checkpointing")
    p.add_argument("--tiny", action="store_true", help="a tiny model on CPU in seconds (what CI runs)")
    p.add_argument("--peak-tflops", type=float, default=None, help="bf16 peak (default: from the GPU's name)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    if args.tiny:  # every path of a GPU run, micro-batches included, at a size a CPU runs in seconds
        args.sizes, args.device, args.engine, args.turns = "tiny", "cpu", "hf", 1
        args.episodes, args.prompt_tokens, args.new_tokens = args.episodes or 3, args.prompt_tokens or 24, 4
        args.micro_batch_tokens, args.peak_tflops = 30, args.peak_tflops or 1.0
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    work = paper_workload(Path(args.config))
    print(f"workload: {json.dumps(asdict(work))}")
    results = [run_size(size.strip(), work, args, device) for size in args.sizes.split(",")]
    if os.environ.get("RANK", "0") != "0":
        return results
    head = "| size | params | engine | gen tok/s | update tok/s | update share | iteration | MFU gen | MFU upd |"
    print(head + "\n|" + " --- |" * 9)
    for r in results:
        mfu = [f"{r[k]:.1%}" if r[k] is not None else "n/a" for k in ("mfu_generate", "mfu_update")]
        print(
            f"| {r['size']} | {r['parameters'] / 1e9:.3f}B | {r['engine']} | {r['generate_tokens_per_s']:,.0f} | "
            f"{r['update_tokens_per_s']:,.0f} | {r['update_share']:.0%} | {r['iteration_s_extrapolated']:,.1f} s | "
            f"{mfu[0]} | {mfu[1]} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"workload": asdict(work), "results": results}, indent=1) + "\n")
    return results


if __name__ == "__main__":
    main()
