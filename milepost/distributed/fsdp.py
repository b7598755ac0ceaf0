"""FSDP2 training under ``torchrun``: sharded updates, rank 0 generating, checkpoints as ordinary HF folders.

``torchrun --nproc_per_node N -m milepost train --config ...`` starts N processes; :func:`setup` sees
``WORLD_SIZE`` > 1, joins the process group (NCCL on GPUs, gloo on CPU) with ``dist_timeout_minutes`` as the
collectives' timeout, opens a gloo group for the Python objects and the waits on rank 0, and returns an
:class:`FSDP` that the trainer calls at a few marked hooks:

* ``load(fn)``: rank 0 alone loads the weights; the other ranks build the same architecture on the meta device
  (no memory) and receive their shards when :meth:`FSDP.shard` distributes rank 0's state.
* ``shard(model)``: ``fully_shard`` on each decoder layer, then on the root (the FSDP2 recipe of torchtitan and
  torchtune), with bf16 parameters and float32 gradient reduction under ``bf16``; rank 0's full weights are
  broadcast shard by shard (``set_model_state_dict(..., broadcast_from_rank0=True)``). Rank 0 keeps an
  unsharded copy, the *generator model*, only for the ``hf`` rollout source (which generates with it).
* ``rollout_source(...)``: rank 0 builds the configured rollout source (``milepost.rollout``); its weight push
  gathers the full state dict (a collective on every rank) and rank 0 alone hands it on: into the generator
  model for ``hf``, or as a short-lived gathered model that the ``vllm`` / ``openai`` sources write out.
* ``on_main(play, ...)``: rank 0 plays the episodes and broadcasts them over the gloo group; every rank
  computes the same returns. ``wait_for_main`` holds the other ranks on the gloo group (not in an NCCL
  collective) while rank 0 evaluates.
* ``split(batch)``: each minibatch is split across ranks (rank r takes turns r, r + N, ...); the local loss is
  scaled by ``N * len(local) / len(batch)`` so that FSDP's gradient average equals the full minibatch's
  gradient, and a step equals the single-process step on the same minibatch. ``micro_steps`` is the busiest
  rank's micro-step count, which every rank runs.
* ``save_checkpoint`` / ``save_final``: the full model and optimizer state gathered to CPU on rank 0, written by
  the ordinary ``training.checkpoint.save_checkpoint`` (an HF folder plus the optimizer state indexed as a
  single-process ``AdamW`` indexes it), so checkpoints load anywhere; ``optimizer_loader`` restores that state
  into the sharded optimizer for an exact ``--resume`` at the same world size. A checkpoint never touches
  the generator: only ``sync`` changes what it serves, and the policy version with it.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import torch

from milepost.backends.logprobs import base_model, text_decoder
from milepost.errors import InputError

T = TypeVar("T")


def world_size() -> int:
    """Processes of this run (``WORLD_SIZE`` that ``torchrun`` / ``accelerate launch`` set; 1 without them)."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise InputError(f"WORLD_SIZE must be an integer, got {os.environ['WORLD_SIZE']!r}") from None


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The decoder layers of an HF causal LM (``model.model.layers`` for Qwen3 / Llama, found generically)."""
    base = base_model(model)
    # A multimodal model (Gemma 3, Qwen2-VL) also holds its vision tower's layers, which come first in
    # ``modules()``: search the text decoder, and the whole model when there is none.
    decoder = text_decoder(model)
    if decoder is None:
        decoder = base
    for module in decoder.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and type(module[0]).__name__.endswith("Layer"):
            return list(module)
    raise InputError(f"FSDP: no decoder layers found in {type(base).__name__}")


@dataclass
class FSDP:
    """This process's place in an FSDP2 run, and the operations the trainer's hooks call."""

    rank: int
    world: int
    mesh: Any
    objects: Any = None
    """the gloo process group that carries Python objects, statistics and waits (None: the default group)"""
    bf16: bool = False
    """bf16 parameters in forward / backward with float32 gradient reduction (``MixedPrecisionPolicy``)"""
    keep_generator: bool = True
    """rank 0 keeps an unsharded generator model (the ``hf`` rollout source generates with it)"""
    generator_model: Any = None
    """rank 0 with ``keep_generator``: the unsharded copy that generates rollouts; None elsewhere"""
    _full_state: dict[str, torch.Tensor] | None = None
    """rank 0, between :meth:`load` and :meth:`shard`: the loaded weights, to be distributed"""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        torch.distributed.barrier(group=self.objects)

    def wait_for_main(self) -> None:
        """Every rank waits here until rank 0 is done with work of its own (an evaluation), on the gloo group."""
        self.barrier()

    def load(self, fn: Callable[[], tuple[Any, Any]]) -> tuple[Any, Any]:
        """``(model, tokenizer)`` with the weights loaded once: ``fn()`` on rank 0, then the other ranks build
        the architecture of rank 0's config on the meta device (no memory); :meth:`shard` distributes the
        weights. Rank 0 runs first (``fn`` may build files, e.g. a ``tiny:`` model)."""
        from transformers import AutoModelForCausalLM

        box: list[Any] = [None]
        if self.is_main:
            try:
                model, tokenizer = fn()
            except Exception as exc:  # the others would wait for the weights until the timeout: tell them
                torch.distributed.broadcast_object_list([exc], src=0, group=self.objects)
                raise
            self._full_state = dict(model.state_dict())
            generation = getattr(model, "generation_config", None)
            box = [(model.config, generation, tokenizer, next(model.parameters()).dtype)]
        torch.distributed.broadcast_object_list(box, src=0, group=self.objects)
        if self.is_main:
            return model, tokenizer
        if isinstance(box[0], BaseException):
            raise box[0]
        config, generation, tokenizer, dtype = box[0]
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config).to(dtype)
        if generation is not None:
            model.generation_config = generation
        return model.eval(), tokenizer

    def shard(self, model: Any) -> Any:
        """Shard ``model`` in place (each decoder layer, then the root); rank 0 first keeps an unsharded copy
        when ``keep_generator``. A model from :meth:`load` (meta on ranks > 0) then receives rank 0's weights.

        Under ``bf16`` the sharded float32 parameters are the master weights; layers are gathered and computed
        in bf16 and gradients reduced in float32 (torch/distributed/fsdp/_fully_shard/_fsdp_api.py,
        ``MixedPrecisionPolicy``).
        """
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        if self.is_main and self.keep_generator:
            self.generator_model = copy.deepcopy(model)
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16 if self.bf16 else None, reduce_dtype=torch.float32)
        for layer in decoder_layers(model):
            fully_shard(layer, mesh=self.mesh, mp_policy=policy)
        fully_shard(model, mesh=self.mesh, mp_policy=policy)
        if self._full_state is not None or any(p.is_meta for p in model.parameters()):
            self._distribute(model)
        return model

    def _distribute(self, model: Any) -> None:
        """Rank 0's loaded weights into every rank's shards (ranks > 0 were built on the meta device).

        ``set_model_state_dict`` with ``broadcast_from_rank0`` sends each full tensor from rank 0 and keeps the
        local shard (torch/distributed/checkpoint/state_dict.py, ``_load_model_state_dict``); the buffers that
        are not in a state dict (rotary frequencies) are broadcast one by one.
        """
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        device = self.mesh.device_type
        if not self.is_main:
            model.to_empty(device=device)
        state: Any = self._full_state if self.is_main else {}
        options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=True)
        set_model_state_dict(model, state or {}, options=options)
        for _, buffer in sorted(model.named_buffers()):
            torch.distributed.broadcast(buffer, src=0)
        self._full_state = None

    def on_main(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on rank 0, its result broadcast to every rank."""
        box = [fn(*args) if self.is_main else None]
        torch.distributed.broadcast_object_list(box, src=0, group=self.objects)
        return box[0]  # type: ignore[return-value]

    def share(self, batch: list[T], rank: int) -> list[T]:
        """Rank ``rank``'s turns of a minibatch (items r, r + N, ...; the first item for a rank left without)."""
        return batch[rank :: self.world] or batch[:1]

    def micro_steps(self, batch: list[T], count: Callable[[list[T]], int]) -> int:
        """The micro-steps every rank runs on ``batch``: the most that ``count`` gives any rank's share. Each
        rank knows the whole minibatch, so all agree without a collective; a rank with fewer pads with
        zero-weight steps (every forward and backward gathers and reduces across ranks)."""
        return max(count(self.share(batch, r)) for r in range(self.world))

    def split(self, batch: list[T]) -> tuple[list[T], float]:
        """This rank's share of a minibatch and the factor its mean loss is scaled by.

        Rank r takes items r, r + N, ...; its loss mean times ``N * len(local) / len(batch)`` makes the average
        of the ranks' gradients (what FSDP's reduce-scatter computes) the gradient of the whole minibatch's mean.
        A rank left without items runs the first one at scale 0 (every rank must join the collectives).
        """
        local = batch[self.rank :: self.world]
        if not local:
            return self.share(batch, self.rank), 0.0
        return local, self.world * len(local) / len(batch)

    def reduce_stats(self, stats: dict[str, float], sums: tuple[str, ...]) -> dict[str, float]:
        """Sum ``sums`` keys over ranks (the loss is stored x N by :meth:`split`'s scale: divided back)."""
        keys = [k for k in sums if k in stats]
        values = torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64)
        torch.distributed.all_reduce(values, group=self.objects)  # a CPU tensor: the gloo group
        out = dict(stats)
        for key, value in zip(keys, values.tolist()):
            out[key] = value / self.world if key == "loss" else value
        return out

    def full_state_dict(self, model: Any) -> dict[str, torch.Tensor]:
        """The whole model's state on CPU on rank 0 (empty elsewhere); every rank must call it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        state: Any = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return state

    def push(self, model: Any) -> Any:
        """Gather ``model``'s weights into the generator model (rank 0); returns the generator model."""
        state = self.full_state_dict(model)
        if self.is_main:
            self.generator_model.load_state_dict(state)
        return self.generator_model

    def gathered(self, model: Any) -> Any:
        """``model``'s full weights as an unsharded model on rank 0 (None elsewhere); every rank must call it.

        Built on the meta device and given the gathered CPU tensors (``load_state_dict(assign=True)``): no
        second copy, and released when the caller drops it. The generator model is not touched.
        """
        state = self.full_state_dict(model)
        if not self.is_main:
            return None
        from transformers import AutoModelForCausalLM

        base = base_model(model)
        with torch.device("meta"):
            out = AutoModelForCausalLM.from_config(base.config)
        out.load_state_dict(state, assign=True, strict=False)
        out.tie_weights()
        missing = [n for n, p in out.named_parameters() if p.is_meta]
        if missing:
            raise RuntimeError(f"FSDP: the gathered state has no {missing[0]}")
        generation = getattr(base, "generation_config", None)
        if generation is not None:
            out.generation_config = generation
        return out.eval()

    def optimizer_state(self, model: Any, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """The full optimizer state on rank 0, indexed by parameter position as a single-process ``AdamW``'s
        ``state_dict()`` is (empty elsewhere); every rank must call it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        full: Any = get_optimizer_state_dict(
            model, optimizer, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
        )
        if not self.is_main:
            return {}
        index = {name: i for i, (name, _) in enumerate(model.named_parameters())}
        groups = [{**g, "params": [index[n] for n in g["params"]]} for g in full["param_groups"]]
        return {"state": {index[n]: s for n, s in full["state"].items()}, "param_groups": groups}

    def optimizer_loader(self, model: Any, optimizer: torch.optim.Optimizer) -> Callable[[dict[str, Any]], None]:
        """A ``load_state_dict`` for the sharded optimizer taking :meth:`optimizer_state`'s (or a
        single-process run's) state; every rank reads the checkpoint and calls it."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        names = [name for name, _ in model.named_parameters()]

        def load(state: dict[str, Any]) -> None:
            full: Any = {
                "state": {names[int(i)]: s for i, s in state["state"].items()},
                "param_groups": [{**g, "params": [names[int(i)] for i in g["params"]]} for g in state["param_groups"]],
            }
            set_optimizer_state_dict(model, optimizer, full, options=StateDictOptions(full_state_dict=True))

        return load

    def save_checkpoint(
        self, run_dir: Path, step: int, model: Any, tokenizer: Any, optimizer: torch.optim.Optimizer, config_yaml: str
    ) -> None:
        """Rank 0 writes an ordinary checkpoint of the gathered model and optimizer; the others wait."""
        from milepost.training.checkpoint import save_checkpoint

        generator = self.gathered(model)  # not the generator model: only sync changes what it serves
        state = self.optimizer_state(model, optimizer)
        if self.is_main:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                gathered: Any = _FullOptimizer(state)  # what save_checkpoint reads of an optimizer
                save_checkpoint(run_dir, step, generator, tokenizer, gathered, None, config_yaml)
        self.barrier()

    def save_final(self, model: Any, tokenizer: Any, folder: Path) -> None:
        """Rank 0 writes the gathered model as an HF folder; the others wait."""
        generator = self.gathered(model)
        if self.is_main:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                generator.save_pretrained(folder)
                tokenizer.save_pretrained(folder)
        self.barrier()

    def rollout_source(self, cfg: Any, model: Any, tokenizer: Any, run_dir: Path) -> Any:
        """Rank 0: the configured rollout source on the generator model, its pushes gathering ``model``'s shards;
        other ranks: a follower that joins the gathers and tracks the version."""
        from milepost.rollout import make_rollout_source

        generator = self.generator_model if self.keep_generator else self.gathered(model)  # a collective
        inner = make_rollout_source(cfg, generator, tokenizer, run_dir) if self.is_main else None
        return ShardedSource(self, inner)

    def close(self) -> None:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


class _FullOptimizer:
    """What ``save_checkpoint`` reads of an optimizer: a gathered state dict."""

    def __init__(self, state: dict[str, Any]) -> None:
        self.state = state

    def state_dict(self) -> dict[str, Any]:
        return self.state


class ShardedSource:
    """A :class:`milepost.rollout.RolloutSource` fed by a sharded model: ``sync`` gathers the full weights on
    every rank, then rank 0 pushes its generator model through the inner source (the weight push from rank 0
    only). ``backend`` exists on rank 0 alone: the trainer plays episodes through :meth:`FSDP.on_main`."""

    def __init__(self, fsdp: FSDP, inner: Any) -> None:
        self.fsdp = fsdp
        self.inner = inner
        self.name = inner.name if inner is not None else "follower"
        self.version = -1

    @property
    def backend(self) -> Any:
        if self.inner is None:
            raise RuntimeError("only rank 0 generates: play episodes through FSDP.on_main")
        return self.inner.backend

    def sync(self, model: Any, tokenizer: Any, version: int) -> float:
        import time

        start = time.perf_counter()
        # hf: load into the generator model it plays with; vllm / openai: a gathered model they write out.
        generator = self.fsdp.push(model) if self.fsdp.keep_generator else self.fsdp.gathered(model)
        if self.inner is not None:
            self.inner.sync(generator, tokenizer, version)
        self.version = version
        return time.perf_counter() - start

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def setup(cfg: Any) -> FSDP | None:
    """Join the process group ``torchrun`` describes and build the device mesh; None for a single process.

    Refused (one-line error): MiRA (its critics and reference policy are not sharded).
    """
    world = world_size()
    if world <= 1:
        return None
    if getattr(cfg.mira, "enabled", False):
        raise InputError("FSDP (torchrun with several processes) does not train MiRA's critics; run MiRA on one")
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    cuda = torch.cuda.is_available() and cfg.device != "cpu"
    # The other ranks wait while rank 0 alone plays rollouts and evaluations: NCCL's 10-minute default (gloo's
    # 30) would end the run (torch/distributed/distributed_c10d.py, init_process_group's ``timeout``).
    timeout = timedelta(minutes=getattr(cfg, "dist_timeout_minutes", 240.0))
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo", timeout=timeout)
    # Pickled episodes, statistics and waits go over a gloo group of their own (CPU memory, no device copies),
    # with the same timeout.
    objects = dist.new_group(backend="gloo", timeout=timeout)
    mesh = init_device_mesh("cuda" if cuda else "cpu", (dist.get_world_size(),))
    return FSDP(
        rank=dist.get_rank(),
        world=dist.get_world_size(),
        mesh=mesh,
        objects=objects,
        bf16=bool(getattr(cfg, "bf16", False)),
        keep_generator=cfg.rollout.backend == "hf",
    )
