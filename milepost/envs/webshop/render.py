"""Observation text of the shop's pages.

``text`` is WebShop's text mode: the page's strings joined by `` [SEP] ``, clickables included as they must be
written in ``click[...]``. ``text_rich`` marks clickables as WebShop's rich mode does (``[button] X [button_]``)
and puts one element per line. Both show the cart and the options selected so far, which WebShop keeps in its
URL. Every character is ASCII (the catalogue's vocabulary is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from milepost.envs.webshop.search import PAGE_SIZE

if TYPE_CHECKING:
    from milepost.envs.webshop.state import ShopState

RENDER_MODES = ("text", "text_rich")


def _elements(state: ShopState) -> list[tuple[str, bool]]:
    """The page as (text, clickable) elements in reading order."""
    from milepost.envs.webshop.state import ADD, BACK, BUY, CHECKOUT, ITEM, NEXT, PREV, RESULTS, SEARCH, TAB, TABS

    products = state.order.shop.catalogue.products
    out: list[tuple[str, bool]] = [("Instruction:", False), (state.order.instruction(), False)]
    if state.cart:
        names = "; ".join(f"{products[p].pid} {_selection(products[p].dims, sel)}".rstrip() for p, sel in state.cart)
        out.append((f"Cart ({len(state.cart)}): {names}", False))
    page = state.page
    if page == SEARCH:
        out.append(("Search", True))
        if state.cart:
            out.append((CHECKOUT, True))
    elif page == RESULTS:
        out.append((BACK, True))
        total = len(state.results)
        out.append((f"Page {state.page_no + 1} (Total results: {total}) for {state.query!r}", False))
        if state.page_no > 0:
            out.append((PREV, True))
        if (state.page_no + 1) * PAGE_SIZE < total:
            out.append((NEXT, True))
        for i in state.page_results():
            p = products[i]
            out += [(p.pid, True), (p.title, False), (p.price_text(), False)]
    elif page == ITEM:
        p = products[state.product]
        out += [(BACK, True), (PREV, True)]
        for (dim, values), chosen in zip(p.options, state.selection):
            out.append((dim, False))
            out += [(v, True) for v in values]
            if chosen is not None:
                out.append((f"(selected {dim}: {chosen})", False))
        out += [(p.title, False), (f"Price: {p.price_text()}", False), (f"Rating: {p.rating:.1f}", False)]
        out += [(t, True) for t in TABS]
        out += [(ADD, True), (BUY, True)]
    elif page == TAB:
        p = products[state.product]
        out += [(BACK, True), (PREV, True)]
        if state.tab == "Description":
            out.append((p.description(), False))
        elif state.tab == "Features":
            out += [(b, False) for b in p.bullets()]
        else:
            out += [(r, False) for r in p.reviews()]
    else:
        out.append(("Thank you for shopping with us!", False))
    return out


def _selection(dims: tuple[str, ...], sel: tuple[str | None, ...]) -> str:
    return ", ".join(f"{d}: {v}" for d, v in zip(dims, sel) if v is not None)


def render_text(state: ShopState, mode: str = "text") -> str:
    """The page in ``mode`` (``text`` | ``text_rich``)."""
    elements = _elements(state)
    if mode == "text_rich":
        return "\n".join(f"[button] {t} [button_]" if click else t for t, click in elements)
    return " [SEP] ".join(t for t, _ in elements)
