"""The verl estimator's arithmetic (``milepost.integrations.verl.estimator``) without verl: its defaults when verl
passes no gamma or milepost section, the settings it reads from a dict or an OmegaConf-like config, and group
normalisation by uid. ``tests/integrations/test_verl.py`` checks the registered estimator inside verl itself."""

from __future__ import annotations

import importlib
import sys
from types import MappingProxyType
from typing import Any

import pytest
import torch

from milepost.integrations.verl.estimator import milepost_advantage, setting, uid_groups
from milepost.integrations.verl.turns import place_turn_rewards
from milepost.training.returns import advantages


def _batch() -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
    """Three episodes (token rows) and their per-turn streams: r = (0, 1) | (0) | (1, 0, 1), r_step = (0, -1) |
    (-1) | (0, 0, -0.5)."""
    masks = [[1, 1, 0, 1, 0, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0, 0], [1, 0, 1, 1, 0, 1, 0, 0, 0]]
    traj = [[0.0, 1.0], [0.0], [1.0, 0.0, 1.0]]
    step = [[0.0, -1.0], [-1.0], [0.0, 0.0, -0.5]]
    rewards = torch.tensor([place_turn_rewards(m, t, s) for m, t, s in zip(masks, traj, step)])
    return rewards, torch.tensor(masks), [torch.tensor(t) for t in traj], [torch.tensor(s) for s in step]


def _per_turn(adv: torch.Tensor) -> list[list[float]]:
    """Each row's value on the first token of each turn (turns start at 0, 3 | 0 | 0, 2, 5)."""
    starts = [[0, 3], [0], [0, 2, 5]]
    return [[float(adv[i, s]) for s in row] for i, row in enumerate(starts)]


def _expected(**kwargs: Any) -> list[list[float]]:
    _, _, traj, step = _batch()
    return [a.tolist() for a in advantages(traj, step, **kwargs)]


class DictConfigLike:
    """Unit-test fixture: an object with ``get`` and no Mapping base, the way OmegaConf's DictConfig looks to
    the estimator (``algorithm`` section of verl's config)."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def test_without_a_config_the_estimator_uses_the_papers_gamma_and_alpha() -> None:
    rewards, mask, _, _ = _batch()
    adv, returns = milepost_advantage(rewards, mask)
    assert adv is returns
    assert _per_turn(adv) == [pytest.approx(row) for row in _expected(gamma=0.995, alpha=0.2)]
    # Not verl's gamma 1.0 nor alpha 0: the defaults are the paper's.
    assert _per_turn(adv) != [pytest.approx(row) for row in _expected(gamma=1.0, alpha=0.2)]
    assert _per_turn(adv) != [pytest.approx(row) for row in _expected(gamma=0.995, alpha=0.0)]
    # Every model token of a turn carries its turn's value; observation and padding tokens carry nothing.
    assert adv[2, 2].item() == adv[2, 3].item()
    assert adv[mask == 0].abs().sum().item() == 0.0
    assert adv.dtype == torch.float32 and adv.shape == mask.shape


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"gamma": None, "milepost": None},
        {"milepost": {"alpha": None, "normalisation": None, "std_floor": None}},
        DictConfigLike({"gamma": None}),
        MappingProxyType({"milepost": {}}),
        "not a config",
    ],
    ids=["empty", "nulls", "null-options", "dictconfig-like", "mapping", "no-get"],
)
def test_a_config_without_the_settings_or_with_nulls_takes_the_defaults(config: Any) -> None:
    rewards, mask, _, _ = _batch()
    adv, _ = milepost_advantage(rewards, mask, config=config)
    assert _per_turn(adv) == [pytest.approx(row) for row in _expected(gamma=0.995, alpha=0.2, std_floor=0.1)]


def test_the_settings_are_read_from_a_dict_and_from_an_omegaconf_like_config() -> None:
    rewards, mask, _, _ = _batch()
    options: dict[str, Any] = {"alpha": 0.7, "normalisation": "none", "std_floor": 0.0}
    settings = {"gamma": 0.5, "milepost": options}
    want = _expected(gamma=0.5, alpha=0.7, normalisation="none")
    assert want[0] == pytest.approx([0.5, 1.0 - 0.7])  # G = (0.5, 1), r_step = (0, -1), no normalisation
    for config in (settings, DictConfigLike({"gamma": 0.5, "milepost": DictConfigLike(options)})):
        adv, _ = milepost_advantage(rewards, mask, config=config)
        assert _per_turn(adv) == [pytest.approx(row) for row in want]
    floored, _ = milepost_advantage(rewards, mask, config={"milepost": {"std_floor": 50.0}})
    assert _per_turn(floored) == [pytest.approx(row) for row in _expected(std_floor=50.0)]
    assert float(floored.abs().max()) < 0.05  # a floor far above the spread shrinks every advantage


def test_group_normalisation_groups_rows_by_uid_and_needs_the_index() -> None:
    assert uid_groups(["b", "a", "b", 3]) == [2, 1, 2, 0]  # sorted by the uids' text: "3" < "a" < "b"
    rewards, mask, _, _ = _batch()
    config = {"milepost": {"normalisation": "group"}}
    adv, _ = milepost_advantage(rewards, mask, index=["x", "y", "x"], config=config)
    assert _per_turn(adv) == [pytest.approx(row) for row in _expected(normalisation="group", groups=[0, 1, 0])]
    with pytest.raises(ValueError) as refused:
        milepost_advantage(rewards, mask, config=config)
    assert str(refused.value) == "milepost.normalisation group: verl passed no uid index"


def test_setting_reads_keys_and_falls_back() -> None:
    assert setting(None, "gamma", 0.9) == 0.9
    assert setting({"gamma": 0.0}, "gamma", 0.9) == 0.0  # a falsy value is a value
    assert setting({"gamma": None}, "gamma", 0.9) == 0.9
    assert setting(DictConfigLike({"alpha": 0.3}), "alpha", 0.2) == 0.3
    assert setting(["gamma"], "gamma", 0.9) == 0.9


def test_the_arithmetic_imports_without_verl(monkeypatch: pytest.MonkeyPatch) -> None:
    """With verl unimportable, the estimator module still imports (the registration module does not)."""
    monkeypatch.setitem(sys.modules, "verl", None)
    for name in ("milepost.integrations.verl.estimator", "milepost.integrations.verl.advantage"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    module = importlib.import_module("milepost.integrations.verl.estimator")
    assert callable(module.milepost_advantage)
    with pytest.raises(ImportError):
        importlib.import_module("milepost.integrations.verl.advantage")
