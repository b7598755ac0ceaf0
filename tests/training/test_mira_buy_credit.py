"""experiments/mira_buy_credit.py: each web-shop action lands in its kind (a product id and ``Buy Now`` both start
with ``click[B``, which a prefix test confuses)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import mira_buy_credit  # noqa: E402


@pytest.mark.parametrize(
    ("action", "kind"),
    [
        ("search[long lasting lip balm]", "search"),
        ("click[B09L3K92UJ]", "open a product"),
        ("click[Buy Now]", "Buy Now"),
        ("click[Add to Cart]", "Add to Cart"),
        ("click[Checkout]", "Checkout"),
        ("click[Back to Search]", "Back to Search"),
        ("click[Next >]", "page turn"),
        ("click[< Prev]", "page turn"),
        ("click[4 fl oz]", "choose an option"),
        ("click[citrus]", "choose an option"),
        (None, "invalid"),
        ("", "invalid"),
    ],
)
def test_each_action_lands_in_its_kind(action: str | None, kind: str) -> None:
    assert mira_buy_credit.action_kind(action) == kind


def test_the_scoring_config_takes_overrides_and_refuses_a_run_without_mira(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("mira: {enabled: true}\n")
    cfg = mira_buy_credit.credit_config(run, 3, ["mira.terminal_potential=label"])
    assert (cfg.threads, cfg.mira.terminal_potential) == (3, "label")
    assert mira_buy_credit.credit_config(run, 1, []).mira.terminal_potential == "zero"
    (run / "config.yaml").write_text("mira: {enabled: false}\n")
    with pytest.raises(SystemExit, match="not a MiRA run"):
        mira_buy_credit.credit_config(run, 1, [])
