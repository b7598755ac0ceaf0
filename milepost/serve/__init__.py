"""OpenAI-compatible HTTP serving of a local model (``milepost serve``)."""
