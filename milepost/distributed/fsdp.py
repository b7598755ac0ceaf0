"""FSDP2 training under ``torchrun``: sharded updates, rank 0 generating, checkpoints as ordinary HF folders.

``torchrun --nproc_per_node N -m milepost train --config ...`` starts N processes; :func:`setup` sees
``WORLD_SIZE`` > 1, joins the process group (NCCL on GPUs, gloo on CPU) and returns an :class:`FSDP` that the
trainer calls at a few marked hooks:

* ``shard(model)``: ``fully_shard`` on each decoder layer, then on the root (the FSDP2 recipe of torchtitan and
  torchtune). Rank 0 keeps an unsharded copy, the *generator model*, for rollouts.
* ``rollout_source(...)``: rank 0 builds the configured rollout source (``milepost.rollout``) on the generator
  model; the weight push gathers the full state dict (a collective on every rank) and rank 0 alone loads it
  into the generator. Other ranks hold no generator.
* ``on_main(play, ...)``: rank 0 plays the episodes and broadcasts them; every rank computes the same returns.
* ``split(batch)``: each minibatch is split across ranks (rank r takes turns r, r + N, ...); the local loss is
  scaled by ``N * len(local) / len(batch)`` so that FSDP's gradient average equals the full minibatch's
  gradient, and a step equals the single-process step on the same minibatch.
* ``save_checkpoint`` / ``save_final``: the full model and optimizer state gathered to CPU on rank 0, written by
  the ordinary ``training.checkpoint.save_checkpoint`` (an HF folder plus the optimizer state indexed as a
  single-process ``AdamW`` indexes it), so checkpoints load anywhere; ``optimizer_loader`` restores that state
  into the sharded optimizer for an exact ``--resume`` at the same world size.
"""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

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
    base = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
    for module in base.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) and type(module[0]).__name__.endswith("Layer"):
            return list(module)
    raise InputError(f"FSDP: no decoder layers found in {type(base).__name__}")


@dataclass
class FSDP:
    """This process's place in an FSDP2 run, and the operations the trainer's hooks call."""

    rank: int
    world: int
    mesh: Any
    generator_model: Any = None
    """rank 0: the unsharded copy that generates rollouts and is written to checkpoints; None elsewhere"""

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        torch.distributed.barrier()

    @contextlib.contextmanager
    def main_first(self) -> Iterator[None]:
        """Rank 0 runs the block first (it may build files, e.g. a ``tiny:`` model), then the others."""
        if not self.is_main:
            self.barrier()
        yield
        if self.is_main:
            self.barrier()

    def shard(self, model: Any) -> Any:
        """Shard ``model`` in place (each decoder layer, then the root); rank 0 first keeps an unsharded copy."""
        from torch.distributed.fsdp import fully_shard

        if self.is_main:
            self.generator_model = copy.deepcopy(model)
        for layer in decoder_layers(model):
            fully_shard(layer, mesh=self.mesh)
        fully_shard(model, mesh=self.mesh)
        return model

    def on_main(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on rank 0, its result broadcast to every rank."""
        box = [fn(*args) if self.is_main else None]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]  # type: ignore[return-value]

    def split(self, batch: list[T]) -> tuple[list[T], float]:
        """This rank's share of a minibatch and the factor its mean loss is scaled by.

        Rank r takes items r, r + N, ...; its loss mean times ``N * len(local) / len(batch)`` makes the average
        of the ranks' gradients (what FSDP's reduce-scatter computes) the gradient of the whole minibatch's mean.
        A rank left without items runs the first one at scale 0 (every rank must join the collectives).
        """
        local = batch[self.rank :: self.world]
        if not local:
            return batch[:1], 0.0
        return local, self.world * len(local) / len(batch)

    def reduce_stats(self, stats: dict[str, float], sums: tuple[str, ...]) -> dict[str, float]:
        """Sum ``sums`` keys over ranks (the loss is stored x N by :meth:`split`'s scale: divided back)."""
        keys = [k for k in sums if k in stats]
        values = torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64)
        torch.distributed.all_reduce(values)
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

        generator = self.push(model)
        state = self.optimizer_state(model, optimizer)
        if self.is_main:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                gathered: Any = _FullOptimizer(state)  # what save_checkpoint reads of an optimizer
                save_checkpoint(run_dir, step, generator, tokenizer, gathered, None, config_yaml)
        self.barrier()

    def save_final(self, model: Any, tokenizer: Any, folder: Path) -> None:
        """Rank 0 writes the gathered model as an HF folder; the others wait."""
        generator = self.push(model)
        if self.is_main:
            with open(os.devnull, "w") as null, contextlib.redirect_stderr(null):
                generator.save_pretrained(folder)
                tokenizer.save_pretrained(folder)
        self.barrier()

    def rollout_source(self, cfg: Any, model: Any, tokenizer: Any, run_dir: Path) -> Any:
        """Rank 0: the configured rollout source on the generator model, its pushes gathering ``model``'s shards;
        other ranks: a follower that joins the gathers and tracks the version."""
        from milepost.rollout import make_rollout_source

        inner = make_rollout_source(cfg, self.generator_model, tokenizer, run_dir) if self.is_main else None
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
        generator = self.fsdp.push(model)
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
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    mesh = init_device_mesh("cuda" if cuda else "cpu", (dist.get_world_size(),))
    return FSDP(rank=dist.get_rank(), world=dist.get_world_size(), mesh=mesh)
