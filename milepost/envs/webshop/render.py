"""Observation text of the shop's pages.

``text`` is WebShop's text mode: the page's strings joined by `` [SEP] ``, clickables included as they must be
written in ``click[...]``. ``text_rich`` marks clickables as WebShop's rich mode does (``[button] X [button_]``)
and puts one element per line. ``accessibility`` is a WebArena-style accessibility tree with numbered elements
(``[12] link 'B0... Acme Cotton Tee'``) that ``click [12]`` and ``type [3] [cotton tee]`` address. All show the
cart and the options selected so far, which WebShop keeps in its URL. Every character is ASCII (the catalogue's
vocabulary is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from milepost.envs.webshop.search import PAGE_SIZE

if TYPE_CHECKING:
    from milepost.envs.webshop.state import ShopState

RENDER_MODES = ("text", "text_rich", "accessibility")
TEXT, BUTTON, LINK, OPTION, TEXTBOX = "StaticText", "button", "link", "radio", "textbox"
Element = tuple[str, str, str]  # (role, name, value): the clickable value or "" (static text / the search box)


def elements(state: ShopState) -> list[Element]:
    """The page as (role, name, clickable value) elements in reading order; in the accessibility tree, element
    ``[n]`` is ``elements(state)[n - 2]`` (``[1]`` is the root)."""
    from milepost.envs.webshop.state import ADD, BACK, BUY, CHECKOUT, ITEM, NEXT, PREV, RESULTS, SEARCH, TAB, TABS

    products = state.order.shop.catalogue.products
    out: list[Element] = [(TEXT, "Instruction:", ""), (TEXT, state.order.instruction(), "")]
    if state.cart:
        names = "; ".join(f"{products[p].pid} {_selection(products[p].dims, sel)}".rstrip() for p, sel in state.cart)
        out.append((TEXT, f"Cart ({len(state.cart)}): {names}", ""))
    page = state.page
    if page == SEARCH:
        out.append((TEXTBOX, "Search", ""))
        if state.cart:
            out.append((BUTTON, CHECKOUT, CHECKOUT))
    elif page == RESULTS:
        out.append((BUTTON, BACK, BACK))
        total = len(state.results)
        out.append((TEXT, f"Page {state.page_no + 1} (Total results: {total}) for {state.query!r}", ""))
        if state.page_no > 0:
            out.append((BUTTON, PREV, PREV))
        if (state.page_no + 1) * PAGE_SIZE < total:
            out.append((BUTTON, NEXT, NEXT))
        for i in state.page_results():
            p = products[i]
            out += [(LINK, p.pid, p.pid), (TEXT, p.title, ""), (TEXT, p.price_text(), "")]
    elif page == ITEM:
        p = products[state.product]
        out += [(BUTTON, BACK, BACK), (BUTTON, PREV, PREV)]
        for (dim, values), chosen in zip(p.options, state.selection):
            out.append((TEXT, dim, ""))
            out += [(OPTION, v, v) for v in values]
            if chosen is not None:
                out.append((TEXT, f"(selected {dim}: {chosen})", ""))
        out += [(TEXT, p.title, ""), (TEXT, f"Price: {p.price_text()}", ""), (TEXT, f"Rating: {p.rating:.1f}", "")]
        out += [(BUTTON, t, t) for t in TABS]
        out += [(BUTTON, ADD, ADD), (BUTTON, BUY, BUY)]
    elif page == TAB:
        p = products[state.product]
        out += [(BUTTON, BACK, BACK), (BUTTON, PREV, PREV)]
        if state.tab == "Description":
            out.append((TEXT, p.description(), ""))
        elif state.tab == "Features":
            out += [(TEXT, b, "") for b in p.bullets()]
        else:
            out += [(TEXT, r, "") for r in p.reviews()]
    else:
        out.append((TEXT, "Thank you for shopping with us!", ""))
    return out


def _selection(dims: tuple[str, ...], sel: tuple[str | None, ...]) -> str:
    return ", ".join(f"{d}: {v}" for d, v in zip(dims, sel) if v is not None)


def render_text(state: ShopState, mode: str = "text") -> str:
    """The page in ``mode`` (``text`` | ``text_rich`` | ``accessibility``)."""
    items = elements(state)
    if mode == "text_rich":
        return "\n".join(name if role == TEXT else f"[button] {name} [button_]" for role, name, _ in items)
    if mode == "accessibility":
        lines = ["[1] RootWebArea 'WebShop' focused: True"]
        for n, (role, name, _) in enumerate(items, 2):
            extra = " focused: True required: False" if role == TEXTBOX else ""
            lines.append(f"\t[{n}] {role} {name!r}{extra}")
        return "\n".join(lines)
    return " [SEP] ".join(name for _, name, _ in items)
