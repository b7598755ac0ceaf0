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
