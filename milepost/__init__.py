"""milepost: build, train and evaluate LLM agents that finish long-horizon tasks."""

__version__ = "0.1.0"
