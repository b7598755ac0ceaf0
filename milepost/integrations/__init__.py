"""Adapters that run milepost environments, agents and advantages inside other training frameworks."""
