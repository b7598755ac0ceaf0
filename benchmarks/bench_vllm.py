"""Agent-loop rollouts with the ``vllm`` backend beside the ``hf`` backend, in the same run.

For each model size: 64 Sudoku 4x4 episodes through ``run_episodes`` (the trainer's rollout path: chat prompts,
token ids and log-probs back), once with ``HFBackend`` and once with an in-process ``VLLMBackend``; generation
tokens/s (completion tokens over the rollout's wall time, environment steps included), and the time of one
weight sync (write the weights as safetensors + in-place reload + prefix-cache reset; ``hf`` has none: the
generator is the trainer's model). Sizes: the shipped tiny checkpoint (``checkpoints/sudoku4-sft``, ~1M
parameters) and a random-initialised Qwen3 of ~50M parameters built from the config class (no download; it
answers nonsense, so every turn runs to ``max_new_tokens``). Engine start-up is reported apart.

Needs the ``vllm`` extra (run it with ``.venv-vllm/bin/python benchmarks/bench_vllm.py``); elsewhere it says so and
exits 0. Writes ``benchmarks/results/vllm.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "sudoku4-sft"
RESULTS = Path(__file__).parent / "results"


def qwen3_50m(folder: Path, seed: int = 0) -> Path:
    """A random-init Qwen3 of ~50M parameters with the shipped checkpoint's tokenizer and chat template."""
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(SHIPPED)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=640,
        intermediate_size=2048,
        num_hidden_layers=9,
        num_attention_heads=10,
        num_key_value_heads=10,
        head_dim=64,
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config).float()
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    for extra in ("chat_template.jinja",):
        if (SHIPPED / extra).is_file():
            shutil.copy(SHIPPED / extra, folder / extra)
    return folder


def rollout(backend: Any, episodes: int, max_steps: int, max_new_tokens: int) -> dict[str, float]:
    """Play ``episodes`` 4x4 Sudoku episodes with ``backend``; tokens/s over the rollout's wall time."""
    from milepost.agent.loop import AgentSettings, BackendPolicy, Job, run_episodes
    from milepost.envs import make_env
    from milepost.envs.sudoku import make_task
    from milepost.envs.sudoku.generator import generate_easy

    tasks = [make_task(*generate_easy(4, 6, 7, i), level="S2", split="test", index=i) for i in range(episodes)]
    settings = AgentSettings(memory_k=0, temperature=0.8, max_new_tokens=max_new_tokens, batch_size=episodes)
    policy = BackendPolicy(backend, settings)

    def env() -> Any:
        return make_env("sudoku", size=4, render="hints", max_steps=max_steps)

    start = time.perf_counter()
    done = run_episodes(env, [Job(t, 0) for t in tasks], policy, settings, seed=0, progress=False)
    seconds = time.perf_counter() - start
    tokens = sum(len(t.completion_ids) for ep in done for t in ep.turns)
    turns = sum(len(ep.turns) for ep in done)
    return {"seconds": seconds, "tokens": tokens, "turns": turns, "tokens_per_s": tokens / seconds}


def measure(path: Path, label: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    from milepost.backends.hf import HFBackend
    from milepost.backends.vllm import VLLMBackend
    from milepost.rollout import write_weights

    params = sum(p.numel() for p in HFBackend(path, device="cpu", dtype="float32").model.parameters())
    rows = []
    hf = HFBackend(path, device="cpu", dtype="float32")
    rollout(hf, 4, 1, 4)  # warm-up
    result = rollout(hf, args.episodes, args.max_steps, args.max_new_tokens)
    rows.append({"model": label, "params": params, "backend": "hf", "start_s": 0.0, "sync_s": 0.0, **result})
    start = time.perf_counter()
    engine = VLLMBackend(
        path, dtype="float32", gpu_memory_utilization=0.1, max_model_len=2048, enforce_eager=args.eager
    )
    started = time.perf_counter() - start
    try:
        rollout(engine, 4, 1, 4)  # warm-up
        result = rollout(engine, args.episodes, args.max_steps, args.max_new_tokens)
        with tempfile.TemporaryDirectory() as tmp:
            syncs = []
            for _ in range(3):
                t0 = time.perf_counter()
                engine.reload_weights(write_weights(hf.model, hf.tokenizer, Path(tmp)))
                syncs.append(time.perf_counter() - t0)
        sync = sorted(syncs)[1]
    finally:
        engine.close()
    rows.append({"model": label, "params": params, "backend": "vllm", "start_s": started, "sync_s": sync, **result})
    return rows


def write(rows: list[dict[str, Any]], out: Path, args: argparse.Namespace) -> None:
    out.mkdir(parents=True, exist_ok=True)
    meta = {"episodes": args.episodes, "max_steps": args.max_steps, "max_new_tokens": args.max_new_tokens}
    meta |= {"eager": args.eager, "threads": args.threads}
    (out / "vllm.json").write_text(json.dumps({"settings": meta, "rows": rows}, indent=2) + "\n", encoding="utf-8")
    lines = [
        "# Agent-loop rollouts: vllm vs hf (benchmarks/bench_vllm.py)",
        "",
        f"Settings: {json.dumps(meta)}. CPU, fp32, one run each on a shared machine.",
        "",
        "| model | params | backend | engine start (s) | rollout (s) | turns | tokens | tokens/s | weight sync (s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['params'] / 1e6:.1f}M | {r['backend']} | {r['start_s']:.1f} | {r['seconds']:.1f} | "
            f"{r['turns']} | {r['tokens']} | {r['tokens_per_s']:.0f} | {r['sync_s']:.3f} |"
        )
    (out / "vllm.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--max-steps", type=int, default=4, help="turns per episode at most")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument("--sizes", nargs="+", default=["tiny", "50m"], help="tiny | 50m")
    parser.add_argument("--eager", action="store_true", help="vLLM without graph compilation (faster start)")
    # 1 by default: on this shared 2-core machine, 2 torch threads ran the hf rollout 7x slower than 1 (threads
    # spinning against other processes), which would credit vLLM with a speed-up it did not earn.
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the hf backend")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(argv)
    from milepost.backends.vllm import vllm_available

    if not vllm_available():
        print("bench_vllm: skipped, vllm is not installed here (make test-vllm builds .venv-vllm)")
        return 0
    torch.set_num_threads(args.threads)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            path = SHIPPED if size == "tiny" else qwen3_50m(Path(tmp) / "qwen3-50m")
            rows += measure(path, size, args)
    write(rows, Path(args.out), args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
