"""Set-up shared by SFT and RL: the policy, the tasks, the environments and the agent a training config names.

``milepost sft`` and ``milepost train`` are recipes; this module is their builder (the torchtune split of
builders from recipes): one place turns a :class:`TrainConfig` into a model and tokenizer, a task list, an
environment factory, agent settings and an agent, so both recipes read the config the same way.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from pathlib import Path
from typing import Any

import torch

from milepost.agent.loop import Agent, AgentSettings
from milepost.agent.memory import MemoryItem
from milepost.agent.prompts import build_messages
from milepost.backends.hf import load_model, resolve_device_dtype
from milepost.datasets import load_tasks
from milepost.envs import make_env
from milepost.envs.levels import parse_levels
from milepost.errors import InputError
from milepost.training.config import TrainConfig
from milepost.types import Task

log = logging.getLogger(__name__)


def select_tasks(cfg: TrainConfig, split: str, levels: str | None = None) -> list[Task]:
    """The dataset's tasks of ``split`` at ``levels`` (default: the config's training levels, else all)."""
    tasks = load_tasks(cfg.data, split)
    if not tasks:
        raise InputError(f"{cfg.data}: the {split} split is empty")
    if tasks[0].env != cfg.env.name:
        raise InputError(f"{cfg.data} holds {tasks[0].env} tasks but env.name is {cfg.env.name}")
    spec = levels if levels is not None else cfg.levels
    if spec:
        wanted = {lv.name for lv in parse_levels(spec, cfg.env.name, tasks[0].size)}
        tasks = [t for t in tasks if t.level in wanted]
        if not tasks:
            raise InputError(f"{cfg.data}: no {split} tasks at levels {spec}")
    return tasks


def env_factory(cfg: TrainConfig, size: int) -> Any:
    kwargs = cfg.env.env_kwargs()
    kwargs["size"] = size
    return lambda: make_env(cfg.env.name, **kwargs)


def agent_settings(cfg: TrainConfig, batch_size: int = 64) -> AgentSettings:
    a = cfg.agent
    return AgentSettings(
        memory_k=a.memory_k,
        temperature=a.temperature,
        top_p=a.top_p,
        top_k=a.top_k,
        max_new_tokens=a.max_new_tokens,
        batch_size=batch_size,
    )


def make_agent(cfg: TrainConfig) -> Agent | None:
    """The agent of ``agent.agent_kind`` (None: plain); SGO demonstrations use the programmatic planner."""
    if cfg.agent.agent_kind == "sgo":
        from milepost.planning import SGOAgent

        return SGOAgent()
    if cfg.agent.agent_kind == "subgoal":
        from milepost.planning.conditioned import SubgoalConditionedAgent

        return SubgoalConditionedAgent()
    return None


def prompt_corpus(cfg: TrainConfig) -> list[str]:
    """Agent prompts of the configured environment (goal, memory, observation), for fitting a tiny tokenizer.

    The backends' default corpus knows the environments' own text but not the agent's prompt wording, which
    lives a layer above them; without these texts its phrases would cost a token per character. With the SGO
    agent the corpus also holds its checklists and PROGRESS lines.
    """
    out = []
    make = env_factory(cfg, cfg.env.size)
    for seed in range(4):
        env = make()
        obs, _ = env.reset(seed=seed)
        memory = [MemoryItem(obs, "only 1 fits r1c1.", "value(1, r1c1)", "r1c1 is already filled")]
        out += [m["content"] for m in build_messages(env.goal_text(), obs, memory)]
    if cfg.agent.agent_kind == "sgo":
        from milepost.planning.sgo import corpus_texts

        out += corpus_texts([make() for _ in range(4)])
    if cfg.agent.agent_kind == "subgoal":
        from milepost.planning.conditioned import corpus_texts as target_texts

        out += target_texts([make() for _ in range(4)])
    if cfg.env.name == "webshop":  # the shop's words live on result and product pages, past the first page
        from milepost.envs.webshop.corpus import corpus_texts as shop_texts

        out += shop_texts(make)
    return out


def load_policy(cfg: TrainConfig, run_dir: Path) -> tuple[Any, Any]:
    """The initial (model, tokenizer): a model directory, or ``tiny:SIZE`` built into ``run_dir/initial``."""
    device, dtype = resolve_device_dtype(cfg.device, "float32")
    path = cfg.model
    if path.startswith("tiny:"):
        from milepost.backends.tiny import build_tiny_model, default_corpus

        target = run_dir / "initial"
        if not (target / "config.json").exists():
            corpus = [*default_corpus(), *prompt_corpus(cfg)]
            build_tiny_model(target, size=path.partition(":")[2] or "1m", seed=cfg.seed, corpus=corpus)
        path = str(target)
    return load_model(path, device, dtype)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware (AVX512-BF16 or AMX tiles). torch exposes the checks only as
    ``torch.cpu._is_*_supported``; without them oneDNN emulates bf16 matmuls in fp32 code paths."""
    return bool(torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported())


@functools.cache
def warn_emulated_bf16() -> None:
    """Once per process: bf16 asked for on a CPU that emulates it. Measured on an AVX2-only 2-core EPYC: a LoRA
    SFT step of SmolLM2-135M at 14 tokens/s under bf16 autocast against 307 in fp32
    (experiments/results/rushhour_smollm2.md)."""
    log.warning(
        "bf16 autocast on a CPU without AVX512-BF16 or AMX (torch reports %s): it is emulated and can be many "
        "times slower than fp32 here; set bf16=false",
        torch.backends.cpu.get_cpu_capability(),
    )


def autocast_for(cfg: TrainConfig, device: torch.device) -> Any:
    """bf16 autocast on ``device`` when ``cfg.bf16``, else a no-op context (SFT and RL scoring both use it)."""
    if not cfg.bf16:
        return contextlib.nullcontext()
    if device.type == "cpu" and not cpu_has_native_bf16():
        warn_emulated_bf16()
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
