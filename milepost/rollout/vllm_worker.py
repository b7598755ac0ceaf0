"""A vLLM worker extension: the weight reload the trainer calls, in-process and on a server alike.

vLLM loads it into every worker (``LLM(worker_extension_cls=...)``, or ``--worker-extension-cls`` on the
server), which adds its methods to the worker, so ``collective_rpc("milepost_reload_weights", ...)`` reaches it
both from an in-process engine and through a server's ``/collective_rpc`` route (string arguments only there).

Why not vLLM's own ``reload_weights`` alone: it re-processes each module it loaded weights into, but a tied output
head (``tie_word_embeddings``: Qwen3's small models, milepost's tiny ones) is a second module over the input
embedding's weight, and the CPU build keeps a packed copy of that weight per module for its GEMM. After a plain
reload the head still scores with the old weights (measured: log-prob differences of 0.06 after perturbing only
the embedding). Re-processing every vocabulary embedding refreshes those copies; on a GPU it is a no-op.
"""

from __future__ import annotations

from typing import Any

EXTENSION = "milepost.rollout.vllm_worker.WeightReload"
"""The value for ``worker_extension_cls``."""

RELOAD_METHOD = "milepost_reload_weights"


class WeightReload:
    """Mixed into vLLM's worker class by vLLM itself (hence ``self`` is the worker)."""

    def milepost_reload_weights(self, weights_path: str) -> None:
        """Load the safetensors in ``weights_path`` in place, then refresh the output head's packed copy."""
        from vllm.model_executor.layers.vocab_parallel_embedding import VocabParallelEmbedding

        worker: Any = self
        worker.reload_weights(weights_path=weights_path)
        for module in worker.model_runner.get_model().modules():
            method = getattr(module, "quant_method", None)
            if isinstance(module, VocabParallelEmbedding) and method is not None:
                method.process_weights_after_loading(module)
