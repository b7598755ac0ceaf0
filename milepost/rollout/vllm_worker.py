"""A vLLM worker extension: the weight reload the trainer calls, in-process and on a server alike.

vLLM loads it into every worker (``LLM(worker_extension_cls=...)``, or ``--worker-extension-cls`` on the
server), which adds its methods to the worker, so ``collective_rpc("milepost_reload_weights", ...)`` reaches it
both from an in-process engine and through a server's ``/collective_rpc`` route (string arguments only there).

Why not vLLM's own ``reload_weights`` alone: it re-processes each module it loaded weights into, but a tied output
head (``tie_word_embeddings``: Qwen3's small models, milepost's tiny ones) is a second module over the input
embedding's weight, and the CPU build keeps a packed copy of that weight per module for its GEMM. After a plain
reload the head still scores with the old weights (measured: log-prob differences of 0.06 after perturbing only
the embedding). Re-processing every vocabulary embedding refreshes those copies; on a GPU it is a no-op.

Why it reports what it did not load: vLLM's in-place reload (``reload_weights`` in
``vllm/model_executor/model_loader/reload/inplace.py``, vLLM 0.32) only logs a warning for parameters the folder
did not hold and returns nothing, so a renamed or missing tensor would leave the engine serving stale weights
for the rest of the run. The method records the names ``model.load_weights`` reports loaded and returns the
model's parameters outside that set; :func:`check_reload` turns any into an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from milepost.backends.base import BackendError

EXTENSION = "milepost.rollout.vllm_worker.WeightReload"
"""The value for ``worker_extension_cls``."""

RELOAD_METHOD = "milepost_reload_weights"


class WeightReload:
    """Mixed into vLLM's worker class by vLLM itself (hence ``self`` is the worker)."""

    def milepost_reload_weights(self, weights_path: str) -> list[str]:
        """Load the safetensors in ``weights_path`` in place, then refresh the output head's packed copy.

        Returns:
            The model's parameters the reload did not write (sorted; empty when every one was loaded).
        """
        from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

        worker: Any = self
        model = worker.model_runner.get_model()
        expected = {name for name, _ in model.named_parameters()}
        loaded: set[str] = set()
        load = model.load_weights

        def load_and_record(weights: Any) -> Any:
            names = load(weights)
            loaded.update(names or ())
            return names

        model.load_weights = load_and_record  # an instance attribute over the class method, for this call only
        try:
            worker.reload_weights(weights_path=weights_path)
        finally:
            del model.load_weights
        for module in model.modules():
            method = getattr(module, "quant_method", None)
            if isinstance(module, VocabParallelEmbedding) and method is not None:
                method.process_weights_after_loading(module)
        return sorted(expected - loaded)


def check_reload(results: Sequence[Any], where: str) -> None:
    """Fail when any worker's reload (the :meth:`WeightReload.milepost_reload_weights` results, one per worker)
    left parameters unwritten, or did not report (a worker without milepost's extension).

    Raises:
        BackendError: naming the first parameters the engine still serves from the old weights.
    """
    if not results:
        raise BackendError(f"{where}: the weight reload reported nothing (is the worker extension {EXTENSION}?)")
    for result in results:
        if not isinstance(result, list):
            raise BackendError(f"{where}: the weight reload returned {result!r}, not the list of unloaded weights")
        if result:
            shown = ", ".join(str(n) for n in result[:3])
            raise BackendError(
                f"{where}: the weight reload left {len(result)} parameters with the old weights ({shown}...): "
                "the pushed folder does not name them as the engine's model does"
            )
