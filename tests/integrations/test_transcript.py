"""One episode as one GRPO sequence (``milepost.integrations.transcript``), tested whether or not TRL is installed:
the transcript's environment-token mask and log-probs, the growing conversation the tiny model answers in, and
the reward terms TRL's reward functions read. ``test_trl.py`` drives the same code through TRL's GRPOTrainer."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from milepost.agent.loop import AgentSettings, Job, run_episodes
from milepost.agent.prompts import build_messages
from milepost.backends.base import GenerationRequest
from milepost.backends.hf import HFBackend
from milepost.config import RewardWeights
from milepost.envs import make_env
from milepost.integrations.transcript import (
    TERMS_FIELD,
    ConversationPolicy,
    Transcript,
    episode_terms,
    observation_message,
    reward_functions,
    reward_weights,
)
from milepost.types import REWARD_TERM_NAMES, Completion, Episode, TerminationReason, Turn

ENV_KWARGS = {"size": 4, "render": "hints", "max_steps": 6}


def test_transcript_masks_environment_tokens_and_zeroes_their_log_probs() -> None:
    script = Transcript([7, 8])
    assert script.context() == [7, 8] and script.completion_ids == script.env_mask == script.logprobs == []
    script.add([1, 2, 3], model=True, logprobs=[-0.5, -1.0, -2])
    script.add((4, 5), model=False, logprobs=[-9.0, -9.0])  # observation tokens: log-probs given are not kept
    script.add([6], model=True)  # an answer without log-probs: 0.0
    script.add([], model=False)
    assert script.prompt_ids == [7, 8]
    assert script.completion_ids == [1, 2, 3, 4, 5, 6]
    assert script.env_mask == [1, 1, 1, 0, 0, 1]
    assert script.logprobs == [-0.5, -1.0, -2.0, 0.0, 0.0, 0.0]
    assert all(type(x) is float for x in script.logprobs)
    assert script.context() == [7, 8, 1, 2, 3, 4, 5, 6]
    with pytest.raises(ValueError, match="2 log-probs for 3 completion tokens"):
        script.add([1, 2, 3], model=True, logprobs=[-1.0, -1.0])
    assert len(script.completion_ids) == len(script.env_mask) == len(script.logprobs) == 6  # nothing half-added


def test_a_later_observation_is_a_user_message_without_memory() -> None:
    message = observation_message("Board:\n1 2\n3 4")
    assert message["role"] == "user" and "Board:\n1 2\n3 4" in message["content"]
    assert "Recent turns" not in message["content"]


def _turn(index: int, terms: dict[str, float]) -> Turn:
    return Turn(index, "obs", "answer", ["a"], 0.0, terms, [], None)  # type: ignore[arg-type]


def test_episode_terms_sum_each_term_over_the_turns_and_say_success() -> None:
    turns = [
        _turn(0, {"outcome": 0.0, "format": -1.0, "valid": 0.0, "milestone": 1.0}),
        _turn(1, {"outcome": 0.0, "format": 0.0, "valid": -1.0, "milestone": 2.0}),
        _turn(2, {"outcome": 1.0, "format": -1.0, "valid": -1.0, "milestone": 0.5}),
    ]
    episode = Episode("t", "p", 0, 0, TerminationReason.SOLVED, True, 3, 3, turns=turns)
    assert episode_terms(episode) == {"outcome": 1.0, "format": -2.0, "valid": -2.0, "milestone": 3.5, "success": 1.0}
    episode.success, episode.turns = False, []
    empty = episode_terms(episode)
    assert empty == {"outcome": 0.0, "format": 0.0, "valid": 0.0, "milestone": 0.0, "success": 0.0}
    assert all(type(v) is float for v in empty.values())  # floats even without a turn, as TRL's rewards are


def test_reward_functions_read_the_episode_terms_with_milepost_weights() -> None:
    terms = [
        {"outcome": 1.0, "format": 0.0, "valid": -2.0, "milestone": 3.0, "success": 1.0},
        {"outcome": 0.0, "format": -1.0, "valid": 0.0, "milestone": 0.0, "success": 0.0},
    ]
    funcs = reward_functions()
    assert [f.__name__ for f in funcs] == [f"milepost_{n}" for n in REWARD_TERM_NAMES]
    assert all(n in (f.__doc__ or "") for f, n in zip(funcs, REWARD_TERM_NAMES))
    got = [f(prompts=["p", "q"], completions=["c", "d"], **{TERMS_FIELD: terms}) for f in funcs]
    assert got == [[1.0, 0.0], [0.0, -1.0], [-2.0, 0.0], [3.0, 0.0]]
    assert reward_weights() == [1.0, 0.1, 0.1, 0.0]
    assert reward_weights(RewardWeights(outcome=2.0, format=0.5, valid=0.25, milestone=0.75)) == [2.0, 0.5, 0.25, 0.75]


def test_transcript_is_what_the_model_scores(tiny_model_dir: Path) -> None:
    """Every answer token's behaviour log-prob equals the model's log-prob of it in the full transcript: the
    sequence GRPO trains on is the context each turn was sampled from, and observation tokens are masked."""
    torch.manual_seed(0)
    backend = HFBackend(tiny_model_dir, device="cpu", dtype="float32")
    settings = AgentSettings(memory_k=0, temperature=1.0, max_new_tokens=12, batch_size=2)
    policy = ConversationPolicy(backend, settings)
    assert policy.name == backend.name and policy.scripted is False
    env = make_env("sudoku", **ENV_KWARGS)
    jobs = [Job(env.sample_task(seed), sample=i) for i, seed in enumerate(range(2))]
    episodes = run_episodes(lambda: make_env("sudoku", **ENV_KWARGS), jobs, policy, settings, progress=False)
    assert sum(e.steps for e in episodes) >= 4  # the random model plays several turns (format errors do not end it)
    for episode in episodes:
        script = policy.transcripts[episode.sample]
        mask = script.env_mask
        assert len(script.completion_ids) == len(mask) == len(script.logprobs)
        # The answer tokens, in order, are exactly the turns' completions.
        answers = [tok for tok, m in zip(script.completion_ids, mask) if m]
        assert answers == [tok for turn in episode.turns for tok in turn.completion_ids]
        # One observation block between consecutive answers, and it holds the environment's observation text.
        blocks = "".join(str(m) for m in mask).split("1")
        assert sum(1 for b in blocks if b) == episode.steps - 1
        env_text = backend.tokenizer.decode([t for t, m in zip(script.completion_ids, mask) if not m])
        for turn in episode.turns[1:]:
            assert turn.observation.splitlines()[0] in env_text
        ids = torch.tensor([script.prompt_ids + script.completion_ids])
        with torch.no_grad():
            logits = backend.model(ids).logits[0, len(script.prompt_ids) - 1 : -1]
        scored = torch.log_softmax(logits.float(), dim=-1).gather(-1, torch.tensor(script.completion_ids)[:, None])
        for lp, want, m in zip(scored[:, 0].tolist(), script.logprobs, mask):
            if m:
                assert lp == pytest.approx(want, abs=1e-4)
            else:
                assert want == 0.0


SFT = Path(__file__).resolve().parents[2] / "checkpoints" / "sudoku4-sft"


class ScriptedTokenBackend:
    """Unit-test fixture standing in for the ``hf`` backend: the shipped Sudoku SFT model's real tokenizer and
    chat template, answers scripted as text (tokenised, then the tokenizer's end-of-turn token), every request
    recorded. It lets the conversation layout be checked token for token without running a model."""

    name = "scripted-tokens"

    def __init__(self, answers: list[str]) -> None:
        from transformers import AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(SFT)
        end = self.tokenizer.convert_tokens_to_ids("<|end|>")
        assert isinstance(end, int)
        self.eos_ids = frozenset({end})
        self.answers = answers
        self.requests: list[list[int]] = []
        self.params: list[object] = []

    def encode(self, request: GenerationRequest) -> list[int]:
        assert request.messages is not None
        text = self.tokenizer.apply_chat_template(request.messages, tokenize=False, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        out = []
        for request in requests:
            prompt = list(request.prompt_ids or [])
            self.requests.append(prompt)
            self.params.append(request.params)
            text = self.answers[len(self.requests) - 1]
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if text.endswith("..."):  # cut at the token budget: no end-of-turn token sampled
                out.append(Completion(prompt, ids, [-0.25] * len(ids), text, "length"))
            else:
                ids.append(min(self.eos_ids))
                out.append(Completion(prompt, ids, [-0.25] * len(ids), text, "stop"))
        return out


def test_each_turn_is_asked_in_the_conversation_the_chat_template_writes() -> None:
    """The prompt of turn t is the chat template's rendering of [system, user 1, answer 1, ..., user t]: an
    answer's end-of-turn token is not written twice, an answer cut before it gets the template's, and each later
    observation is a user message of its own."""
    answers = ["ACTION: value(r1c1, 9)", "REASON: again. ACTION: value(r9c9, 1) ...", "ACTION: nothing"]
    backend = ScriptedTokenBackend(answers)
    settings = AgentSettings(memory_k=0, max_new_tokens=16, batch_size=1)
    policy = ConversationPolicy(backend, settings)
    kwargs = {**ENV_KWARGS, "max_steps": 3}
    task = make_env("sudoku", **kwargs).sample_task(0)
    (episode,) = run_episodes(lambda: make_env("sudoku", **kwargs), [Job(task, sample=5)], policy, settings,
                              progress=False)  # fmt: skip
    assert episode.steps == 3 and list(policy.transcripts) == [5]
    assert episode.policy == policy.name == "scripted-tokens" and policy.scripted is False
    # Each turn samples with its own seed: the episode's seed, then the turn.
    assert backend.params == [settings.sampling(episode.seed * 1_000 + t) for t in range(3)]
    script = policy.transcripts[5]
    tok = backend.tokenizer
    env = make_env("sudoku", **kwargs)
    observation, _ = env.reset(options={"task": task})
    messages = build_messages(env.goal_text(), observation)
    assert len(backend.requests) == 3
    for t, prompt in enumerate(backend.requests):
        if t:  # the previous answer, then this turn's observation as a new user message
            messages += [
                {"role": "assistant", "content": answers[t - 1]},
                observation_message(episode.turns[t].observation),
            ]
        want = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        assert tok.decode(prompt) == want, f"turn {t + 1}"
        assert prompt == script.context()[: len(prompt)]  # each prompt is a prefix of the final transcript
    assert backend.requests[0] == script.prompt_ids
    # The mask: each answer (with its end-of-turn token) is 1, each observation block between answers is 0.
    answer_ids = [turn.completion_ids for turn in episode.turns]
    mask_runs = "".join(str(m) for m in script.env_mask)
    blocks = [len(b) for b in mask_runs.replace("01", "0|1").replace("10", "1|0").split("|")]
    assert mask_runs[0] == "1" and blocks[0::2] == [len(ids) for ids in answer_ids]
    assert [tok for tok, m in zip(script.completion_ids, script.env_mask) if m] == [
        i for ids in answer_ids for i in ids
    ]
    assert script.logprobs == [-0.25 if m else 0.0 for m in script.env_mask]
