"""Training configuration: one dataclass per concern, loaded from YAML with ``key=value`` overrides.

Field docstrings cite the paper's symbols (seed paper Table 3; DESIGN: Training). ``configs/`` holds one
YAML per reproduced arm, each with the paper-scale values or the tiny-CPU profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from milepost.config import EnvConfig
from milepost.rewards.milestone import TRAJECTORY_REWARDS, MilestoneRewardConfig
from milepost.tracking import LoggingConfig


@dataclass
class AgentConfig:
    memory_k: int = 2
    """K: turns kept in the sliding-window memory"""
    temperature: float = 0.8
    """sampling temperature of rollouts (and of pi_theta in the loss)"""
    top_p: float = 1.0
    top_k: int = 0
    max_new_tokens: int = 64
    """response tokens per turn at most"""
    agent_kind: str = "plain"
    """plain | sgo (prompts carry the programmatic plan and progress; answers begin with a PROGRESS line) |
    subgoal (prompts name one target, the milestone tracker's current subgoal; for ``rl.reward: subgoal``)"""

    def __post_init__(self) -> None:
        if self.agent_kind not in ("plain", "sgo", "subgoal"):
            raise ValueError(f"agent.agent_kind: {self.agent_kind!r} is not one of plain, sgo, subgoal")
        if self.memory_k < 0:
            raise ValueError(f"agent.memory_k: must be >= 0, got {self.memory_k}")
        if self.temperature <= 0:
            raise ValueError(f"agent.temperature: RL needs sampling, so it must be > 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"agent.top_p: must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"agent.max_new_tokens: must be >= 1, got {self.max_new_tokens}")


@dataclass
class Phase:
    """One phase of a horizon curriculum: train on these levels for this many iterations."""

    levels: str
    iterations: int

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"curriculum phase {self.levels}: iterations must be >= 1")


ESTIMATORS = ("paper", "gigpo", "distance", "random")
OUTCOME_REWARDS = ("outcome", "success")
"""``rl.reward`` values on the 0/1 outcome scale that MiRA's value critic predicts"""


@dataclass
class RLConfig:
    iterations: int = 100
    """policy updates of the run (the sum over curriculum phases when a curriculum is set)"""
    tasks_per_iter: int = 16
    """distinct tasks per iteration"""
    samples_per_task: int = 4
    """episodes per task (the group for group normalisation)"""
    minibatches: int = 2
    """M: one optimizer step per minibatch; later minibatches are off-policy"""
    lr: float = 1e-6
    """learning rate (paper: 1e-6, constant)"""
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    micro_batch_tokens: int = 8192
    """token budget of one forward / backward: each minibatch (each rank's share under FSDP) runs as
    micro-batches of similar-length rows whose padded size, rows x (longest prompt + longest answer), stays
    within it (a longer row runs alone), gradients accumulated into one optimizer step equal to the one-shot
    step; 0 = the whole minibatch at once. Activation memory scales with this budget, not with the minibatch"""
    activation_checkpointing: bool = False
    """recompute each decoder layer's activations in backward (transformers' gradient checkpointing): about
    one extra forward of compute; a micro-batch then keeps each layer's input, not everything inside it"""
    estimator: str = "paper"
    """per-turn advantage: paper (batch-normalised trajectory + alpha * step advantages), gigpo (episode group +
    anchor-state step groups, Feng et al. 2025), distance (the solver's exact distance removed per turn,
    normalised: an oracle upper bound, not a learner's estimate), random (independent N(0, 1) per turn, drawn
    from the seed and iteration: a control with no information, what the update does to the policy from noise
    alone); ``milepost credit audit`` scores them"""
    gigpo_gamma: float = 0.95
    """gigpo: discount of the step-level returns (verl-agent's default)"""
    gigpo_omega: float = 1.0
    """gigpo: weight of the step-level advantage"""
    gamma: float = 0.995
    """discount of the trajectory return"""
    alpha: float = 0.2
    """weight of the normalised step reward in A_t"""
    normalisation: str = "batch"
    """batch (paper) | group (GRPO-style) | none"""
    std_floor: float = 0.1
    """smallest std used by the normalisation, in units of the outcome reward (success = 1); 0 = the paper's plain
    normalisation. An all-solved batch has returns that differ only by discounting (gamma^T, a few hundredths
    apart); without a floor they are scaled to unit variance and the first turns of the longer episodes are
    punished for their length alone (the demo's atomic arm collapsed so at one seed). With 0.1 such a batch's
    trajectory advantages stay within (1 - gamma^(H-1)) / 0.1, while a batch where even one episode in 32 fails
    (outcome std >= 0.17) normalises as the paper's"""
    subgoal_decomposition: bool = False
    """pay the milestone term at each subgoal and cut the return there (paper section 4.2.1)"""
    milestone_weight: float = 1.0
    """weight of the milestone term in r_t under subgoal decomposition"""
    is_cap: float = 3.0
    """C: Seq-TIS truncation"""
    is_low: float = 0.995
    """C_low: Geo-MIS lower threshold"""
    is_high: float = 1.01
    """C_high: Geo-MIS upper threshold"""
    is_truncate: bool = True
    is_mask: bool = True
    reward: str = "outcome"
    """trajectory reward r_t: outcome (sparse: the environment's outcome term, which on the web shop is WebShop's
    partial credit for a wrong purchase), success (the success bit alone), milestone (outcome + milestone term),
    guide (the framework guide's milestone reward generator, ``rl.milestone_reward``) or subgoal
    (milestone-conditioned: 1 on the turn that reaches the target subgoal the prompt names, segment returns ending
    there; needs ``agent.agent_kind: subgoal``)"""
    milestone_reward: MilestoneRewardConfig = field(default_factory=MilestoneRewardConfig)
    curriculum: list[Phase] = field(default_factory=list)
    """horizon curriculum; empty = train on ``data.levels`` throughout"""
    task_draw: str = "sample"
    """how a run without MiRA's failure curriculum draws an iteration's tasks from its stream
    ``random.Random(f"{seed}:{iteration}")``: sample (``random.sample``; every run before this option drew so) |
    keys (the curriculum's weighted keys with every weight 1: the same uniform distribution, and a MiRA run with
    the curriculum under the same seed draws the same tasks until its weights move, so an arm without the
    curriculum differs from it by what the curriculum changed, not by another random stream)"""

    def __post_init__(self) -> None:
        if self.iterations < 1:
            raise ValueError(f"rl.iterations: must be >= 1, got {self.iterations}")
        if self.tasks_per_iter < 1 or self.samples_per_task < 1:
            raise ValueError("rl.tasks_per_iter and rl.samples_per_task must be >= 1")
        if self.minibatches < 1 or self.minibatches > self.tasks_per_iter * self.samples_per_task:
            raise ValueError(f"rl.minibatches: must be in 1..episodes per iteration, got {self.minibatches}")
        if self.lr <= 0:
            raise ValueError(f"rl.lr: must be > 0, got {self.lr}")
        if self.micro_batch_tokens < 0:
            raise ValueError(
                f"rl.micro_batch_tokens: must be >= 0 (0 = whole minibatches), got {self.micro_batch_tokens}"
            )
        if not 0 <= self.gamma <= 1:
            raise ValueError(f"rl.gamma: must be in [0, 1], got {self.gamma}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"rl.estimator: {self.estimator!r} is not one of {', '.join(ESTIMATORS)}")
        if not 0 <= self.gigpo_gamma <= 1:
            raise ValueError(f"rl.gigpo_gamma: must be in [0, 1], got {self.gigpo_gamma}")
        if self.normalisation not in ("batch", "group", "none"):
            raise ValueError(f"rl.normalisation: {self.normalisation!r} is not one of batch, group, none")
        if not 0 < self.is_low <= 1 <= self.is_high or self.is_cap <= 0:
            raise ValueError("rl.is_low / is_high / is_cap: need 0 < C_low <= 1 <= C_high and C > 0")
        if self.curriculum and sum(p.iterations for p in self.curriculum) != self.iterations:
            raise ValueError("rl.curriculum: phase iterations must add up to rl.iterations")
        if self.task_draw not in ("sample", "keys"):
            raise ValueError(f"rl.task_draw: {self.task_draw!r} is not one of sample, keys")
        if self.reward not in TRAJECTORY_REWARDS:
            raise ValueError(f"rl.reward: {self.reward!r} is not one of {', '.join(TRAJECTORY_REWARDS.names())}")


@dataclass
class MiRAConfig:
    """MiRA: milestone-based dense rewards (DESIGN: Training, MiRA). Off unless ``enabled``.

    Ablations: ``potential: false`` (no potential critic), ``objective: reinforce`` (the KL / REINFORCE
    objective instead of MSE regression), ``estimator: mc`` (no doubly-robust estimator), ``value_critic: false``
    with ``estimator: mc`` (no value critic: the advantage is the shaped return, centred only by the batch
    normalisation), ``curriculum: false`` (no failure-driven curriculum).
    """

    enabled: bool = False
    critic: str = "trunk"
    """trunk (MLP heads on the policy's last hidden state, no gradient into the policy) | separate (small
    transformers of their own)"""
    critic_size: str = "0.5m"
    """tiny preset of ``separate`` critics"""
    potential_lr: float = 1e-3
    value_lr: float = 1e-3
    critic_epochs: float = 2.0
    """passes over the replay buffer per iteration"""
    critic_batch: int = 64
    buffer: int = 2048
    """states kept for critic training"""
    warmup_iterations: int = 1
    """rollout batches that train only the critics before the first policy update (extra episodes, logged)"""
    potential: bool = True
    """shape r_t with the potential critic: r~_t = r_t + c (gamma P(s_t+1) - P(s_t))"""
    shaping_coef: float = 1.0
    """c at the start of training"""
    shaping_anneal: int = 0
    """iterations over which c decays linearly to 0 (0 = constant)"""
    terminal_potential: str = "zero"
    """P(s_T) of the state after the last turn. zero (default): the shaping terms telescope to -P(s_0), a
    constant of the start state, so shaping is policy-invariant (Ng, Harada and Russell 1999) and only
    redistributes credit in time. label: P(s_T) = the exact progress k / K of the final state, so the shaping
    terms telescope to gamma^T k / K - P(s_0): a partial-credit bonus for the subgoals reached (a failed episode
    with 3 of 4 subgoals gains +0.75 gamma^T), which changes what the policy is rewarded for"""
    value_critic: bool = True
    """train and use the value critic V(s_t, g); false (the "no value critic" ablation) takes V = 0 everywhere, so
    the advantage is the shaped return G~_t (needs ``estimator: mc`` and the value filter off)"""
    estimator: str = "dr"
    """dr (lambda TD + (1 - lambda) Monte-Carlo) | td (lambda = 1) | mc (G~_t - V(s_t), no doubly-robust mix) |
    gae (GAE(gamma, gae_lambda): sum_l (gamma gae_lambda)^l delta_t+l over TD errors)"""
    lam: float = 0.5
    """lambda of the doubly-robust advantage"""
    gae_lambda: float = 0.95
    """lambda of ``estimator: gae`` (0.95 as in the framework guide; 0 = one-step TD, 1 = Monte-Carlo)"""
    objective: str = "mse"
    """mse: (beta log(pi / pi_ref) - A)^2 against the previous phase's policy | reinforce: the RL loss of
    ``rl`` (importance weights included) plus ``kl_coef`` x KL(pi || pi_ref)"""
    beta: float = 0.5
    kl_coef: float = 0.0
    phase_iterations: int = 4
    """iterations per phase: the reference policy and the curriculum's task mix are renewed each phase"""
    curriculum: bool = True
    """failure-driven curriculum: a phase's failed tasks, and tasks at their level and the next one up, weigh
    more in the next phase's mix"""
    fail_boost: float = 2.0
    similar_boost: float = 1.0
    generate: int = 0
    """tasks generated near the failures at the end of each phase (same level or one up, same Sudoku technique
    tier or Rush Hour blocker count, none equal to a test task) and added to the pool; 0 = off"""
    filter_low: float = 0.0
    """tasks whose V(s_0, g) is below this are left out as hopeless (0 = off)"""
    filter_high: float = 1.0
    """tasks whose V(s_0, g) is above this are left out as trivial (1 = off)"""

    def __post_init__(self) -> None:
        choices = {
            "critic": ("trunk", "separate"),
            "estimator": ("dr", "td", "mc", "gae"),
            "objective": ("mse", "reinforce"),
            "terminal_potential": ("label", "zero"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"mira.{name}: {getattr(self, name)!r} is not one of {', '.join(allowed)}")
        if not 0 <= self.lam <= 1:
            raise ValueError(f"mira.lam: must be in [0, 1], got {self.lam}")
        if not 0 <= self.gae_lambda <= 1:
            raise ValueError(f"mira.gae_lambda: must be in [0, 1], got {self.gae_lambda}")
        if min(self.potential_lr, self.value_lr, self.beta) <= 0:
            raise ValueError("mira.potential_lr, mira.value_lr and mira.beta must be > 0")
        if self.critic_epochs <= 0 or self.critic_batch < 1 or self.buffer < 1:
            raise ValueError("mira.critic_epochs, mira.critic_batch and mira.buffer must be positive")
        if self.warmup_iterations < 0 or self.shaping_anneal < 0 or self.phase_iterations < 1:
            raise ValueError("mira.warmup_iterations and mira.shaping_anneal must be >= 0, phase_iterations >= 1")
        if self.generate < 0:
            raise ValueError(f"mira.generate: must be >= 0, got {self.generate}")
        if self.generate and not self.curriculum:
            raise ValueError("mira.generate: new tasks join the failure curriculum; set mira.curriculum true")
        if self.kl_coef < 0 or self.fail_boost < 0 or self.similar_boost < 0:
            raise ValueError("mira.kl_coef, mira.fail_boost and mira.similar_boost must be >= 0")
        if not 0 <= self.filter_low < self.filter_high <= 1:
            raise ValueError("mira.filter_low / filter_high: need 0 <= low < high <= 1")
        if not self.value_critic and self.estimator != "mc":
            raise ValueError(
                f"mira.value_critic: false leaves V = 0, which only the mc estimator reads as intended "
                f"(the shaped return); set mira.estimator: mc, not {self.estimator!r}"
            )
        if not self.value_critic and (self.filter_low > 0 or self.filter_high < 1):
            raise ValueError("mira.value_critic: false has no V(s_0, g) to filter by; set filter_low 0, filter_high 1")


@dataclass
class SFTConfig:
    tasks: int = 512
    """demonstration episodes (oracle playthroughs of training tasks)"""
    noise: float = 0.0
    """share of demonstration turns replaced by an error (format / illegal), so the model sees recoveries;
    only the oracle's own turns become training targets"""
    macro_share: float = 0.0
    """share of demonstration tasks played in flexible macro mode (up to ``macro_k`` actions per turn), so one
    checkpoint serves both the atomic and the macro arms"""
    macro_k: int = 4
    macro_mode: str = "flexible"
    """action mode of the macro demonstrations: flexible (up to ``macro_k`` actions per turn) | slide (Rush Hour:
    one ``move(X, dir, N)`` per turn, for the slide-macro arm)"""
    cell_first: bool = False
    """Sudoku demonstrations write value(rXcY, n): the cell before the digit, which small models learn sooner"""
    epochs: float = 2.0
    batch_size: int = 32
    group_by_length: bool = False
    """draw each batch from examples of similar length (shuffled chunks of 50 batches, sorted by length, cut
    into batches, batch order shuffled): less padding, same examples per epoch; off keeps a plain shuffle"""
    lr: float = 1e-3
    """learning rate (tiny from-scratch models: 1e-3 with warm-up; paper, pretrained: 5e-6)"""
    warmup_steps: int = 50
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    episodes: list[str] = field(default_factory=list)
    """``episodes.jsonl`` files of a teacher model played through the real loop (``milepost eval --split train``
    with an openai or hf policy): their turns, replayed in the student's prompts, become SFT examples"""
    keep: str = "solved"
    """teacher turns kept: solved (the error-free turns of solved episodes) | correct (every turn whose actions
    the environment counts as correct moves, solved or not); think blocks stay in the targets"""
    solver: bool = True
    """also train on ``tasks`` solver demonstrations (false with ``episodes``: the teacher's turns only)"""
    lora_rank: int = 0
    """0: every weight is trained; > 0: a peft LoRA adapter of this rank on ``lora_targets`` is trained and the
    base weights stay frozen (a pretrained model on a small machine); checkpoints hold the adapter, ``final`` the
    merged model, which every backend loads like any other"""
    lora_alpha: int = 0
    """LoRA scale numerator (0: twice the rank, peft's common choice)"""
    lora_targets: list[str] = field(
        default_factory=lambda: ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    )
    """module names the adapter wraps (Llama / Qwen names: attention and MLP projections)"""

    def __post_init__(self) -> None:
        if self.keep not in ("solved", "correct"):
            raise ValueError(f"sft.keep: {self.keep!r} is not one of solved, correct")
        if not self.solver and not self.episodes:
            raise ValueError("sft.solver: false needs sft.episodes (teacher episodes.jsonl files) to train on")
        if self.tasks < 1 or self.epochs <= 0 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError("sft: tasks, epochs, batch_size and lr must be positive")
        if not 0 <= self.macro_share <= 1 or self.macro_k < 1:
            raise ValueError("sft.macro_share must be in [0, 1] and sft.macro_k >= 1")
        if self.macro_mode not in ("flexible", "slide"):
            raise ValueError(f"sft.macro_mode: {self.macro_mode!r} is not one of flexible, slide")
        if not 0 <= self.noise < 1:
            raise ValueError(f"sft.noise: must be in [0, 1), got {self.noise}")
        if self.lora_rank < 0 or self.lora_alpha < 0 or (self.lora_rank and not self.lora_targets):
            raise ValueError("sft.lora_rank and sft.lora_alpha must be >= 0, and a LoRA adapter needs lora_targets")


@dataclass
class EvalConfig:
    every: int = 0
    """evaluate every N iterations (0 = only at the end)"""
    n: int = 4
    ks: list[int] = field(default_factory=lambda: [1, 4])
    levels: str | None = None
    limit: int | None = 25
    """test tasks per level"""

    def __post_init__(self) -> None:
        if self.every < 0 or self.n < 1 or (self.limit is not None and self.limit < 1):
            raise ValueError("eval: every must be >= 0, n and limit positive")
        bad = [k for k in self.ks if not 1 <= k <= self.n]
        if bad or not self.ks:
            # pass@k draws k of the n samples per task: checked here, before any training, not at the first evaluation
            raise ValueError(f"eval.ks: every k must be between 1 and eval.n = {self.n} (got {self.ks})")


ROLLOUT_BACKENDS = ("hf", "vllm", "openai")
"""The generators ``rollout.backend`` can name (``milepost.rollout.make_rollout_source`` builds each)."""


@dataclass
class RolloutConfig:
    """Where ``milepost train`` gets its rollouts and how the generator gets the trainer's weights
    (``milepost.rollout``). Any backend that returns token ids and behaviour log-probs will do."""

    backend: str = "hf"
    """hf: the trainer's own model | vllm: an in-process vLLM engine | openai:MODEL@URL: a vLLM server (started
    with VLLM_SERVER_DEV_MODE=1 on ``sync_dir``, so it can reload the weights the trainer writes there)"""
    sync_every: int = 1
    """push the trainer's weights to the generator every N updates (1 = always on-policy; N > 1 samples up to
    N - 1 updates stale, logged as train/staleness and absorbed by the importance weights)"""
    sync_dir: str = ""
    """folder the pushed weights are written to (default RUN/rollout-weights); a server must read this folder"""
    gpu_memory_utilization: float = 0.1
    """vllm: the share of accelerator memory the engine may take (of RAM on a CPU build, where ~0.1 works)"""
    max_model_len: int = 0
    """vllm: context window of the engine (prompt + completion tokens); 0 = max_prompt_tokens + agent.max_new_tokens"""
    max_prompt_tokens: int = 2048
    """vllm: the prompt budget (goal, K memory turns, observation) the derived window makes room for"""
    enforce_eager: bool = False
    """vllm: skip graph compilation (starts in seconds instead of a minute on a CPU; decodes slower)"""
    workers: int = 0
    """Ray actors that play the rollouts, each with its own copy of the policy (0: in the trainer's process;
    milepost.distributed.rollout); the weights reach them at every sync"""

    def __post_init__(self) -> None:
        kind = self.backend.partition(":")[0]
        if kind not in ROLLOUT_BACKENDS:
            raise ValueError(f"rollout.backend: {self.backend!r} is not hf, vllm or openai:MODEL@URL")
        if kind == "openai" and "@http" not in self.backend:
            raise ValueError(f"rollout.backend: {self.backend!r} needs the server, openai:MODEL@http://HOST:PORT/v1")
        if self.sync_every < 1:
            raise ValueError(f"rollout.sync_every: must be >= 1, got {self.sync_every}")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError(f"rollout.gpu_memory_utilization: must be in (0, 1], got {self.gpu_memory_utilization}")
        if self.max_model_len != 0 and self.max_model_len < 16:
            raise ValueError(f"rollout.max_model_len: must be 0 (derived) or >= 16, got {self.max_model_len}")
        if self.max_prompt_tokens < 1:
            raise ValueError(f"rollout.max_prompt_tokens: must be >= 1, got {self.max_prompt_tokens}")
        if self.workers < 0:
            raise ValueError(f"rollout.workers: must be >= 0, got {self.workers}")
        if self.workers and kind != "hf":
            raise ValueError("rollout.workers: each worker holds its own hf model; needs rollout.backend hf")


@dataclass
class TrainConfig:
    """A training run: SFT (``milepost sft``) or RL (``milepost train``)."""

    name: str = "run"
    model: str = "tiny:1m"
    """initial policy: a model directory, or tiny:SIZE to build a from-scratch tiny model"""
    data: str = "runs/data/sudoku4"
    """dataset folder (train split for training, test split for evaluation)"""
    levels: str | None = None
    """training levels (default: all levels of the dataset)"""
    env: EnvConfig = field(default_factory=EnvConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    rl: RLConfig = field(default_factory=RLConfig)
    sft: SFTConfig = field(default_factory=SFTConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    mira: MiRAConfig = field(default_factory=MiRAConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    logging: LoggingConfig = field(default_factory=LoggingConfig)
    """metrics.jsonl, plus the experiment trackers of ``logging.backends`` (tensorboard, wandb, mlflow)"""
    seed: int = 0
    threads: int = 2
    """torch CPU threads"""
    bf16: bool = False
    """bf16 autocast for forward/backward (CPU with AVX512-BF16, or CUDA)"""
    device: str | None = None
    """cpu | cuda (default: CUDA when present)"""
    checkpoint_every: int = 25
    """iterations (RL) or optimizer steps (SFT) between checkpoints"""
    dist_timeout_minutes: float = 240.0
    """torchrun with several processes: how long a collective waits before the run fails. The other ranks
    wait while rank 0 alone plays the rollouts and the periodic evaluations (the paper's is 2,600 episodes),
    which NCCL's 10-minute default does not cover"""

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError(f"threads: must be >= 1, got {self.threads}")
        if self.dist_timeout_minutes <= 0:
            raise ValueError(f"dist_timeout_minutes: must be > 0, got {self.dist_timeout_minutes}")
        if self.checkpoint_every < 1:
            raise ValueError(f"checkpoint_every: must be >= 1, got {self.checkpoint_every}")
        if self.rl.reward == "subgoal":
            if self.agent.agent_kind != "subgoal":
                raise ValueError("rl.reward subgoal: pays the target the prompt names; set agent.agent_kind subgoal")
            if self.rl.subgoal_decomposition:
                raise ValueError("rl.subgoal_decomposition: rl.reward subgoal already ends segments at the targets")
            if self.mira.enabled:
                raise ValueError("mira.enabled: MiRA's advantages ignore the segment ends rl.reward subgoal needs")
        if self.mira.enabled and self.rl.estimator != "paper":
            raise ValueError(
                f"mira.enabled: MiRA computes its own advantages; rl.estimator {self.rl.estimator!r} needs it off"
            )
        if self.rl.estimator != "paper" and (self.rl.subgoal_decomposition or self.rl.reward != "outcome"):
            raise ValueError(
                f"rl.estimator {self.rl.estimator}: uses the outcome (gigpo) or the goal distance (distance); "
                "rl.reward and rl.subgoal_decomposition apply to the paper estimator only"
            )
        if self.mira.enabled and self.rl.subgoal_decomposition:
            raise ValueError(
                "mira.enabled: MiRA's advantages replace subgoal-segmented returns; set rl.subgoal_decomposition false"
            )
        if self.mira.enabled and self.mira.estimator in ("dr", "td", "gae") and self.rl.reward not in OUTCOME_REWARDS:
            # V(s) is a success probability in [0, 1]; the TD part r~_t + gamma V(s_t+1) - V(s_t) assumes the
            # rewards are on the same 0/1 outcome scale, which milestone / guide rewards (up to ~10) are not.
            raise ValueError(
                f"mira.estimator {self.mira.estimator}: the value critic predicts the 0/1 outcome, so it needs "
                f"rl.reward outcome or success (got {self.rl.reward}); use mira.estimator mc or rl.reward outcome"
            )
