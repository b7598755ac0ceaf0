"""One paper-config RL iteration on a lent GPU: generation and FSDP2 updates of a random-init Qwen3 model.

For the day a GPU is lent: builds Qwen3-architecture models at 0.6B and 1.7B parameters from the config class
(``transformers.Qwen3Config`` with the shapes of the published Qwen3-0.6B / Qwen3-1.7B ``config.json``; random
weights, nothing downloaded), in bf16, and runs the work of one iteration of ``configs/paper/sudoku9_*``:

* the workload comes from this project: the config's batch (tasks x samples), minibatches and turn budget, and
  the prompt and answer lengths of a 9x9 episode played by the oracle through the real agent loop at the
  config's renderer and memory, counted with Qwen3's pre-tokenizer (each piece is at least one BPE token, so a
  slight undercount);
* generation: vLLM when it is installed and a GPU is present (prompt token ids in, ``ignore_eos`` so every row
  generates the full answer length), else ``model.generate``;
* update: ``fully_shard`` on each decoder layer then the root (``milepost.distributed.fsdp``; world size 1
  here, the same code torchrun runs), bf16 compute with fp32 master weights, the trainer's REINFORCE loss on
  ``sequence_logprobs``, M minibatch steps of AdamW, micro-batches accumulated;
* printed: tokens/s of generation and of the update, the update's share of the iteration, and MFU (6N per
  trained token, 2N per generated token, attention left out) against the GPU's dense bf16 peak.

Measured turns are few (``--turns``); the full iteration's time is extrapolated by the config's turn count.
It runs on CPU at a tiny size (``--sizes tiny --device cpu``; tested in the default suite) so that it works the
first time it meets a GPU:

    python scripts/device/paper_iteration.py --sizes 0.6b,1.7b --json out.json
"""

from __future__ import annotations

import argparse
import json
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


def fsdp_updates(
    model: Any, rows: list[list[int]], answers: list[list[int]], minibatches: int, micro: int, device: torch.device
) -> float:
    """Seconds for M AdamW steps over the rows (FSDP2, bf16 compute, fp32 master weights)."""
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from milepost.backends.logprobs import sequence_logprobs
    from milepost.distributed.fsdp import decoder_layers
    from milepost.training.losses import reinforce_loss

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29400 + os.getpid() % 1000))
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=0, world_size=1)
    model = model.float()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    model.train()
    chunks = [list(range(len(rows)))[i::minibatches] for i in range(minibatches)]
    _sync(device)
    start = time.perf_counter()
    for chunk in chunks:
        optimizer.zero_grad(set_to_none=True)
        for lo in range(0, len(chunk), micro):
            part = chunk[lo : lo + micro]
            prompts, completions = [rows[i] for i in part], [answers[i] for i in part]
            logp = sequence_logprobs(model, prompts, completions, 0.8, share_prefix=False)  # (b, C)
            mask = torch.ones_like(logp, dtype=torch.bool)
            ones = torch.ones(len(part), device=logp.device)
            loss = reinforce_loss(logp.float(), mask, ones, ones) * len(part) / len(chunk)
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    _sync(device)
    return time.perf_counter() - start


def run_size(size: str, work: Workload, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    torch.manual_seed(0)
    model = build_model(size, device, torch.bfloat16)
    params = sum(p.numel() for p in model.parameters())
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
    upd_s = fsdp_updates(model, rows * args.turns, answers, work.minibatches, args.micro, device)
    generated = rows_per_turn * args.turns * answer
    trained = rows_per_turn * args.turns * (prompt + answer)
    peak = peak_tflops(device, args.peak_tflops)
    scale = work.turns / args.turns
    out = {
        "size": size,
        "parameters": params,
        "engine": engine,
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "rows_per_turn": rows_per_turn,
        "prompt_tokens": prompt,
        "answer_tokens": answer,
        "turns_measured": args.turns,
        "generate_s": gen_s,
        "update_s": upd_s,
        "generate_tokens_per_s": generated / gen_s,
        "update_tokens_per_s": trained / upd_s,
        "update_share": upd_s / (gen_s + upd_s),
        "iteration_s_extrapolated": (gen_s + upd_s) * scale,
        "peak_tflops": peak,
        "mfu_generate": 2 * params * generated / gen_s / (peak * 1e12) if peak else None,
        "mfu_update": 6 * params * trained / upd_s / (peak * 1e12) if peak else None,
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
    p.add_argument("--micro", type=int, default=8, help="rows per forward / backward in the update")
    p.add_argument("--peak-tflops", type=float, default=None, help="bf16 peak (default: from the GPU's name)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads")
    p.add_argument("--json", default=None, help="also write the results here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    work = paper_workload(Path(args.config))
    print(f"workload: {json.dumps(asdict(work))}")
    results = [run_size(size.strip(), work, args, device) for size in args.sizes.split(",")]
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
