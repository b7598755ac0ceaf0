"""The verl adapter: the per-turn reward layout and the paper's advantage over it (plain torch, always run), and
with verl installed (``make test-verl``: its own .venv-verl, verl pins transformers<5.11) the registration in
verl's own registries, one episode through the agent loop against a server-manager fixture, and the registered
estimator against milepost's own advantage function."""

from __future__ import annotations

import asyncio
import importlib.util
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from milepost.integrations.verl.turns import place_turn_rewards, read_turn_rewards, token_advantages, turn_spans
from milepost.training.config import TrainConfig
from milepost.training.returns import advantages

needs_verl = pytest.mark.skipif(
    importlib.util.find_spec("verl") is None,
    reason="verl is not installed: `make test-verl` runs these in .venv-verl (verl 0.9 pins transformers<5.11)",
)


def test_turn_spans_are_the_runs_of_model_tokens() -> None:
    assert turn_spans([1, 1, 0, 0, 1, 1, 1, 0]) == [(0, 1), (4, 6)]
    assert turn_spans(torch.tensor([0, 1, 0, 1])) == [(1, 1), (3, 3)]
    assert turn_spans([0, 0]) == []


def test_turn_rewards_round_trip_and_bad_layouts_are_refused() -> None:
    mask = [1, 1, 0, 0, 1, 1, 1, 0]
    rewards = place_turn_rewards(mask, [0.0, 1.0], [-0.5, 0.0])
    assert rewards == [0.0, 0.0, -0.5, 0.0, 0.0, 0.0, 1.0, 0.0]
    traj, step, spans = read_turn_rewards(torch.tensor(rewards), torch.tensor(mask))
    assert traj.tolist() == [0.0, 1.0] and step.tolist() == [-0.5, 0.0] and spans == [(0, 1), (4, 6)]
    with pytest.raises(ValueError, match="2 model turns"):
        place_turn_rewards(mask, [1.0], [0.0])
    with pytest.raises(ValueError, match="no observation token after it"):
        place_turn_rewards([0, 1], [1.0], [0.0])


def _hand_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """Episode 1: two turns, r = (0, 1), r_step = (0, 0); episode 2: one turn, r = 0, r_step = -1."""
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 1, 0], [1, 0, 0, 0, 0, 0, 0, 0]])
    rewards = torch.tensor(
        [
            place_turn_rewards(mask[0].tolist(), [0.0, 1.0], [0.0, 0.0]),
            place_turn_rewards(mask[1].tolist(), [0.0], [-1.0]),
        ]
    )
    return rewards, mask


def test_token_advantages_match_a_hand_computed_batch_and_milepost_advantages() -> None:
    rewards, mask = _hand_batch()
    adv = token_advantages(rewards, mask, gamma=0.5, alpha=0.2)
    # G = (0.5, 1 | 0): mean 0.5, std sqrt(1/6) -> (0, 1.2247, -1.2247); r_step = (0, 0 | -1): mean -1/3,
    # std sqrt(2/9) -> (0.7071, 0.7071, -1.4142); A = G_hat + 0.2 r_step_hat.
    expected = [0.141421, 1.366166, -1.507588]
    assert adv[0, :2].tolist() == pytest.approx([expected[0]] * 2, abs=1e-4)
    assert adv[0, 4:7].tolist() == pytest.approx([expected[1]] * 3, abs=1e-4)
    assert adv[1, 0].item() == pytest.approx(expected[2], abs=1e-4)
    assert adv[mask == 0].abs().sum().item() == 0.0  # observation and padding tokens carry no advantage
    ours = advantages(
        [torch.tensor([0.0, 1.0]), torch.tensor([0.0])], [torch.zeros(2), torch.tensor([-1.0])], gamma=0.5
    )
    assert torch.cat(ours).tolist() == pytest.approx([adv[0, 0].item(), adv[0, 4].item(), adv[1, 0].item()])


@needs_verl
def test_agent_loop_and_estimator_are_found_through_verls_registries() -> None:
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn
    from verl.utils.import_utils import load_class_from_fqn

    import milepost.integrations.verl.agent_loop as agent_loop
    from milepost.integrations.verl.advantage import compute_milepost_advantage

    entry = _agent_loop_registry["milepost_agent"]
    assert entry == {"_target_": "milepost.integrations.verl.agent_loop.MilepostAgentLoop"}
    assert load_class_from_fqn(entry["_target_"], "agent loop") is agent_loop.MilepostAgentLoop
    assert get_adv_estimator_fn("milepost") is compute_milepost_advantage
    manager = "milepost.integrations.verl.agent_loop.MilepostAgentLoopManager"
    assert load_class_from_fqn(manager, "AgentLoopManager") is agent_loop.MilepostAgentLoopManager


class ScriptedServerManager:
    """Unit-test fixture standing in for verl's server manager (``LLMServerClient.generate``): answers each
    request with the token ids of a scripted policy's answer for a mirror of the episode's environment, and
    the tiny model's real log-probs of those tokens given the prompt ids it was sent."""

    def __init__(self, policy: Any, env: Any, tokenizer: Any, model: Any) -> None:
        self.policy, self.env, self.tokenizer, self.model = policy, env, tokenizer, model
        self.rng = random.Random(0)
        self.calls: list[tuple[list[int], list[int], list[float], dict[str, Any]]] = []
        self.errors: list[bool] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        from verl.workers.rollout.replica import TokenOutput

        text = self.policy.answer(self.env, self.rng)
        ids = [*self.tokenizer.encode(text, add_special_tokens=False), self.tokenizer.eos_token_id]
        ids = ids[: sampling_params["max_tokens"]]
        with torch.no_grad():
            logits = self.model(torch.tensor([prompt_ids + ids])).logits[0].float()  # (P + C, V)
        picked = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(prompt_ids + ids)[1:, None])[:, 0]
        logprobs = picked[-len(ids) :].tolist()
        _, _, _, _, info = self.env.step(self.tokenizer.decode(ids, skip_special_tokens=True))
        self.errors.append(info["error"] is not None)
        self.calls.append((list(prompt_ids), ids, logprobs, dict(sampling_params)))
        return TokenOutput(token_ids=ids, log_probs=logprobs, stop_reason="completed")


def _play(
    tiny_model_dir: Path, policy: Any, task: Any, response_length: int = 2048, extra_info: Any = None
) -> tuple[Any, Any]:
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from milepost.envs.sudoku import SudokuEnv
    from milepost.integrations.verl.agent_loop import MilepostAgentLoop

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    mirror = SudokuEnv(size=4)
    mirror.reset(seed=0, options={"task": task})
    server = ScriptedServerManager(policy, mirror, tokenizer, model)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 2048}}})
    config.actor_rollout_ref.rollout.response_length = response_length

    async def episode() -> Any:
        loop = MilepostAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(OmegaConf.create({})),
        )
        info = extra_info if extra_info is not None else {"task": task.to_dict()}
        return await loop.run({"temperature": 1.0}, extra_info=info, session_id=0)

    return asyncio.run(episode()), server


def _task(index: int = 0) -> Any:
    from milepost.envs.sudoku.env import make_task
    from milepost.envs.sudoku.generator import generate_easy

    return make_task(*generate_easy(4, 4, 3, index), level="S3", index=index)


@needs_verl
def test_one_oracle_episode_token_in_token_out(tiny_model_dir: Path) -> None:
    from milepost.backends.scripted import ScriptedPolicy

    task = _task()
    out, server = _play(tiny_model_dir, ScriptedPolicy("oracle"), task)
    assert out.extra_fields["milepost"] == {
        "task_id": task.task_id,
        "success": True,
        "termination": "solved",
        "steps": 4,
    }
    assert out.reward_score == 1.0 and out.num_turns == 9
    spans = turn_spans(out.response_mask)
    assert len(spans) == len(server.calls) == 4
    sequence = out.prompt_ids + out.response_ids
    for (start, end), (prompt_ids, ids, logprobs, params) in zip(spans, server.calls):
        # Token-in: the server saw exactly the sequence so far; token-out: its ids are the model tokens, mask 1.
        assert prompt_ids == sequence[: len(out.prompt_ids) + start]
        assert out.response_ids[start : end + 1] == ids
        assert out.response_logprobs[start : end + 1] == pytest.approx(logprobs)
        assert params["max_tokens"] == TrainConfig().agent.max_new_tokens and params["temperature"] == 1.0
    observations = [i for i, m in enumerate(out.response_mask) if m == 0]
    assert observations and all(out.response_logprobs[i] == 0.0 for i in observations)
    gaps = [
        (end + 1, (spans[k + 1][0] if k + 1 < len(spans) else len(out.response_ids)))
        for k, (_, end) in enumerate(spans)
    ]
    for first, stop in gaps:  # each observation is the user message only: the answer is not rendered again
        text = _decode(tiny_model_dir, out.response_ids[first:stop])
        assert "Current observation:" in text and "ACTION" not in text and "REASON" not in text
    assert out.response_mask[-1] == 0  # the final observation follows the last turn: the step reward's token
    stored = out.as_dict()
    traj, step, _ = read_turn_rewards(stored["rm_scores"], stored["response_mask"])
    assert traj.tolist() == [0.0, 0.0, 0.0, 1.0] and step.tolist() == [0.0] * 4  # outcome at the solving turn


def _decode(tiny_model_dir: Path, ids: list[int]) -> str:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir).decode(ids)


@needs_verl
def test_format_errors_become_step_rewards_and_the_estimator_equals_milepost(tiny_model_dir: Path) -> None:
    import numpy as np
    from omegaconf import OmegaConf
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from milepost.backends.scripted import ScriptedPolicy
    from milepost.training.config import RLConfig

    solved, _ = _play(tiny_model_dir, ScriptedPolicy("oracle"), _task(1))
    noisy, server = _play(tiny_model_dir, ScriptedPolicy("noisy-oracle", 0.5, "format"), _task(2))
    stored = [solved.as_dict(), noisy.as_dict()]
    _, step, _ = read_turn_rewards(stored[1]["rm_scores"], stored[1]["response_mask"])
    assert any(server.errors) and len(step) == len(server.errors)
    assert [s < 0 for s in step.tolist()] == server.errors  # each malformed answer's format penalty, at its turn

    width = max(len(s["responses"]) for s in stored)
    rewards = torch.zeros(2, width)
    mask = torch.zeros(2, width, dtype=torch.long)
    for i, s in enumerate(stored):
        rewards[i, : len(s["rm_scores"])] = s["rm_scores"]
        mask[i, : len(s["response_mask"])] = s["response_mask"]
    config = OmegaConf.create({"gamma": 0.995, "milepost": {"alpha": 0.2}})
    fn = get_adv_estimator_fn("milepost")
    adv, returns = fn(token_level_rewards=rewards, response_mask=mask, index=np.array(["a", "b"]), config=config)
    streams = [read_turn_rewards(rewards[i], mask[i]) for i in range(2)]
    floor = RLConfig().std_floor  # the trainer's default, which the verl estimator takes too
    ours = advantages([s[0] for s in streams], [s[1] for s in streams], gamma=0.995, alpha=0.2, std_floor=floor)
    for i, (_, _, spans) in enumerate(streams):
        for (start, end), value in zip(spans, ours[i].tolist()):
            assert adv[i, start : end + 1].tolist() == pytest.approx([value] * (end + 1 - start))
    assert torch.equal(adv, returns) and adv[mask == 0].abs().sum().item() == 0.0
    assert adv.abs().sum().item() > 0

    # The v1 trainer's own call (_compute_advantage -> compute_advantage_for_multi_trajectories), its rows
    # keyed {uid}_{session}_{index} and the algorithm section as the config.
    from tensordict import TensorDict
    from verl.protocol import DataProto
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    batch = TensorDict({"token_level_rewards": rewards, "response_mask": mask}, batch_size=2)
    data = DataProto(batch=batch, non_tensor_batch={"uid": np.array(["a", "b"], dtype=object)})
    algorithm = OmegaConf.create({"adv_estimator": "milepost", "gamma": 0.995, "lam": 1.0})
    data = compute_advantage_for_multi_trajectories(
        data, batch_keys=["a_0_0", "b_0_0"], adv_estimator="milepost", gamma=0.995, config=algorithm
    )
    assert torch.allclose(data.batch["advantages"], adv)  # alpha defaults to the paper's 0.2


@needs_verl
def test_a_long_episode_stops_inside_the_response_budget(tiny_model_dir: Path) -> None:
    from milepost.backends.scripted import ScriptedPolicy

    out, server = _play(tiny_model_dir, ScriptedPolicy("noisy-oracle", 0.0, "format"), _task(3), response_length=150)
    assert (
        out.extra_fields["milepost"]["termination"] == "context_overflow"
        and not out.extra_fields["milepost"]["success"]
    )
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs) <= 150
    spans = turn_spans(out.response_mask)
    assert len(spans) == len(server.calls) >= 2 and spans[-1][1] + 1 < len(out.response_mask)
    assert all(params["max_tokens"] <= 150 for _, _, _, params in server.calls)
    _, step, _ = read_turn_rewards(out.as_dict()["rm_scores"], torch.tensor(out.response_mask))
    assert (step < 0).all()  # every answer malformed: a format penalty on each turn


def test_the_documented_verl_command_asks_the_rollout_for_log_probs() -> None:
    """docs/scaling.md's launch command: rollout log-probs on (the agent loop's ``response_logprobs``; verl 0.8's
    default was off), and the flag given once."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "scaling.md").read_text()
    command = text[text.index("python -m verl.trainer.main_ppo") :]
    command = command[: command.index("```")]
    assert command.split().count("actor_rollout_ref.rollout.calculate_log_probs=True") == 1


@needs_verl
def test_the_validation_score_is_the_success_rate(tiny_model_dir: Path) -> None:
    """verl's v1 validation (``PPOTrainer._validate``: each sample's score is its ``rm_scores`` summed, extra
    variables from ``extra_fields["reward_extra_info"]``; then ``_val_metrics_update``) on one solved and one
    failed episode: the ``val-core`` metric is the success rate 0.5, not the mean of the per-turn reward sums."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from milepost.backends.scripted import ScriptedPolicy

    solved, _ = _play(tiny_model_dir, ScriptedPolicy("oracle"), _task(1))
    failed, _ = _play(tiny_model_dir, ScriptedPolicy("noisy-oracle", 0.0, "format"), _task(3), response_length=150)
    outputs = [solved, failed]
    infos: dict[str, list[Any]] = {"reward": [float(o.as_dict()["rm_scores"].sum()) for o in outputs]}
    for out in outputs:  # as _validate collects them
        for key, value in out.extra_fields.get("reward_extra_info", {}).items():
            infos.setdefault(key, []).append(value)
    assert infos["reward"][1] < 0  # the failed episode's format penalties: the reward sum is not a success rate
    metrics = PPOTrainer._val_metrics_update(None, ["milepost/sudoku"] * 2, ["a", "b"], infos, [9, 9])  # type: ignore[arg-type]
    core = {k: v for k, v in metrics.items() if k.startswith("val-core/")}
    assert core, metrics
    assert all("/acc/" in k for k in core), core
    by_task = [v for k, v in core.items() if k.endswith("mean@1")]
    assert by_task and sum(by_task) / len(by_task) == 0.5


@needs_verl
def test_verl_reads_the_parquet_rows_and_the_loop_plays_them(tiny_model_dir: Path, tmp_path: Path) -> None:
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from milepost.backends.scripted import ScriptedPolicy
    from milepost.cli.main import main
    from milepost.datasets import load_tasks
    from milepost.integrations.verl.data import main as data_main

    argv = ["data", "sudoku", "--size", "4", "--levels", "S2-S3", "--train", "2", "--test", "1", "--seed", "0"]
    assert main([*argv, "--out", str(tmp_path / "d"), "--no-progress"]) == 0
    assert data_main([str(tmp_path / "d"), str(tmp_path / "v")]) == 0
    assert data_main([str(tmp_path / "missing"), str(tmp_path / "w")]) == 2
    assert data_main([str(tmp_path / "d"), str(tmp_path / "s3"), "--levels", "S3"]) == 0
    import pandas as pd

    kept = pd.read_parquet(tmp_path / "s3" / "train.parquet")
    assert len(kept) == 2 and all('"level": "S3"' in info["task"] for info in kept["extra_info"])
    assert len(pd.read_parquet(tmp_path / "s3" / "test.parquet")) == 2  # the test split stays whole
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    files = [str(tmp_path / "v" / "train.parquet")]
    dataset = RLHFDataset(data_files=files, tokenizer=tokenizer, config=OmegaConf.create({"max_prompt_length": 4096}))
    tasks = load_tasks(tmp_path / "d", "train")
    assert len(dataset) == len(tasks) == 4
    row = dataset[0]
    assert row["agent_name"] == "milepost_agent" and row["data_source"] == "milepost/sudoku"
    out, _ = _play(tiny_model_dir, ScriptedPolicy("oracle"), tasks[0], extra_info=row["extra_info"])
    assert out.extra_fields["milepost"]["task_id"] == tasks[0].task_id and out.reward_score == 1.0
    first_prompt = tokenizer.apply_chat_template(list(row["raw_prompt"]), add_generation_prompt=True, tokenize=True)
    assert out.prompt_ids == list(getattr(first_prompt, "input_ids", first_prompt))  # the row's prompt, re-rendered


@needs_verl
def test_the_agent_loop_config_file_builds_the_loop_the_way_verls_worker_does(tiny_model_dir: Path) -> None:
    import hydra
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap

    from milepost.integrations.verl.agent_loop import MilepostAgentLoop

    root = Path(__file__).resolve().parents[2]
    entries = OmegaConf.load(root / "configs" / "verl" / "agent_loop.yaml")
    assert [e.name for e in entries] == ["milepost_agent"]
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 8192}}})
    entry = OmegaConf.merge(entries[0], {"config_path": str(root / entries[0].config_path)})

    async def build() -> Any:  # AgentLoopWorker._run_agent_loop's call, inside its event loop
        return hydra.utils.instantiate(
            config=entry,
            trainer_config=DictConfigWrap(config=config),
            server_manager=None,
            tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir),
            processor=None,
            hf_model_type=None,
            dataset_cls=None,
            data_config=DictConfigWrap(OmegaConf.create({})),
            tools=ToolListWrap([]),
        )

    loop = asyncio.run(build())
    assert isinstance(loop, MilepostAgentLoop) and loop.response_length == 8192
    assert (loop.milepost.env.size, loop.milepost.env.max_steps, loop.milepost.agent.max_new_tokens) == (9, 50, 2048)


class SamplingServerManager:
    """Unit-test fixture standing in for verl's server manager: the tiny model's own sampling
    (``model.generate`` at the request's temperature, at most ``max_tokens``) with the log-probs of its logits."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.calls: list[list[int]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any):
        from verl.workers.rollout.replica import TokenOutput

        with torch.no_grad():
            out = self.model.generate(
                torch.tensor([prompt_ids]),
                max_new_tokens=sampling_params["max_tokens"],
                do_sample=True,
                temperature=sampling_params["temperature"],
                top_k=0,
                top_p=1.0,
                return_dict_in_generate=True,
                output_logits=True,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
            )
        ids = out.sequences[0, len(prompt_ids) :].tolist()
        steps = torch.stack([step[0].float() for step in out.logits])  # (C, V)
        logprobs = torch.log_softmax(steps / sampling_params["temperature"], -1).gather(-1, torch.tensor(ids)[:, None])
        self.calls.append(ids)
        return TokenOutput(token_ids=ids, log_probs=logprobs[:, 0].tolist(), stop_reason="completed")


@needs_verl
def test_the_models_own_samples_keep_log_probs_aligned_with_the_trainers_recomputation(tiny_model_dir: Path) -> None:
    """What verl's actor recomputes on the stored sequence (one forward pass over prompt + response) equals the
    log-probs the server returned, at exactly the mask-1 positions."""
    from omegaconf import OmegaConf
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from milepost.integrations.verl.agent_loop import MilepostAgentLoop

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    server = SamplingServerManager(model, tokenizer)
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 4096, "response_length": 600}}})

    async def episode() -> Any:
        loop = MilepostAgentLoop(
            trainer_config=DictConfigWrap(config),
            server_manager=server,
            tokenizer=tokenizer,
            processor=None,
            dataset_cls=None,
            data_config=DictConfigWrap(OmegaConf.create({})),
        )
        return await loop.run({"temperature": 1.0}, extra_info={"task": _task(4).to_dict()}, session_id=0)

    out = asyncio.run(episode())
    spans = turn_spans(out.response_mask)
    assert len(spans) == len(server.calls) >= 2 and len(out.response_ids) <= 600
    assert [out.response_ids[s : e + 1] for s, e in spans] == server.calls
    sequence = torch.tensor([out.prompt_ids + out.response_ids])
    with torch.no_grad():
        logits = model(sequence).logits[0, len(out.prompt_ids) - 1 : -1].float()  # (R, V): predicts each response token
    recomputed = torch.log_softmax(logits, -1).gather(-1, torch.tensor(out.response_ids)[:, None])[:, 0]
    mask = torch.tensor(out.response_mask, dtype=torch.bool)
    assert torch.allclose(recomputed[mask], torch.tensor(out.response_logprobs)[mask], atol=1e-4)
    traj, step, _ = read_turn_rewards(out.as_dict()["rm_scores"], mask.long())
    assert len(traj) == len(step) == len(spans)
