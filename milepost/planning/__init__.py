"""Subgoal-driven online planning (SGO): stuck detection now; planners, tracker and validator to follow."""
