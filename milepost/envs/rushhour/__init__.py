"""Rush Hour: Fogleman-format boards, game state, exact cluster solver, generator and the text environment."""

from milepost.envs.rushhour.board import Layout, parse_board
from milepost.envs.rushhour.env import RushHourEnv, make_task
from milepost.envs.rushhour.rules import oracle_move
from milepost.envs.rushhour.solver import Cluster, solve_board, solve_cluster, solve_many
from milepost.envs.rushhour.state import Move, RushHourState

__all__ = [
    "Cluster",
    "Layout",
    "Move",
    "RushHourEnv",
    "RushHourState",
    "make_task",
    "oracle_move",
    "parse_board",
    "solve_board",
    "solve_cluster",
    "solve_many",
]
