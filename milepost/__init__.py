"""milepost: build, train and evaluate LLM agents that finish long-horizon tasks.

Importing the package registers its Gymnasium environments, as Gymnasium plugins do, so that
``import milepost; gymnasium.make("milepost/Sudoku-v0")`` works. The entry points are module paths that
``gymnasium.make`` imports on first use: ``import milepost`` loads neither the environments nor torch.
"""

__version__ = "0.1.0"

# Gymnasium id -> entry point; ``milepost.envs`` registers the same classes under its short names.
GYMNASIUM_ENVS = {
    "milepost/Sudoku-v0": "milepost.envs.sudoku:SudokuEnv",
    "milepost/RushHour-v0": "milepost.envs.rushhour:RushHourEnv",
    "milepost/WebShop-v0": "milepost.envs.webshop:WebShopEnv",
}


def _register_gymnasium_envs() -> None:
    import gymnasium

    for gym_id, entry_point in GYMNASIUM_ENVS.items():
        if gym_id not in gymnasium.registry:
            gymnasium.register(id=gym_id, entry_point=entry_point)


_register_gymnasium_envs()
