"""Observation text of the shop's pages.

``text`` is WebShop's text mode: the page's strings joined by `` [SEP] ``, clickables included as they must be
written in ``click[...]``. ``text_rich`` marks clickables as WebShop's rich mode does (``[button] X [button_]``)
and puts one element per line. ``accessibility`` is a WebArena-style accessibility tree with numbered elements
(``[12] link 'B0... Acme Cotton Tee'``) that ``click [12]`` and ``type [3] [cotton tee]`` address. All show the
cart and the options selected so far, which WebShop keeps in its URL. Every character is ASCII (the catalogue's
vocabulary is).

Under a profile with ``original_text`` (``webshop``), ``text`` and ``text_rich`` are WebShop's own strings
(``original_text``): what princeton-nlp/WebShop's ``web_agent_text_env.py`` makes of its templates' HTML
(``convert_html_to_text``; simple mode joins the visible strings with `` [SEP] ``; rich mode writes one per line,
``[button] X [button_]`` for buttons, ``[clicked button] X [clicked button_]`` for the selected option values and
for product ids opened since the last ``Back to Search`` (WebShop's session resets its opened asins there), and one
``You have clicked X.`` line per selected value at the top). The done page keeps only the thank-you line and the
score (WebShop's page also prints hidden debugging fields and an MTurk code). Orders of several items, which WebShop
does not have, add a cart line and the ``Add to Cart`` / ``Checkout`` buttons.
"""

from __future__ import annotations

from milepost.envs.webshop.state import (
    ADD,
    BACK,
    BUY,
    CHECKOUT,
    DONE,
    ITEM,
    NEXT,
    PREV,
    RESULTS,
    SEARCH,
    TAB,
    TABS,
    ShopState,
)  # fmt: skip

RENDER_MODES = ("text", "text_rich", "accessibility")
TEXT, BUTTON, LINK, OPTION, TEXTBOX = "StaticText", "button", "link", "radio", "textbox"
Element = tuple[str, str, str]  # (role, name, value): the clickable value or "" (static text / the search box)


def elements(state: ShopState) -> list[Element]:
    """The page as (role, name, clickable value) elements in reading order; in the accessibility tree, element
    ``[n]`` is ``elements(state)[n - 2]`` (``[1]`` is the root)."""
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
        if state.has_next_page():
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
        out += [(BUTTON, ADD, ADD), (BUTTON, BUY, BUY)] if state.order.has_cart else [(BUTTON, BUY, BUY)]
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
    if state.order.profile.original_text and mode in ("text", "text_rich"):
        return original_text(state, rich=mode == "text_rich")
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


# -- WebShop's own strings --------------------------------------------------------------------------------------

# (kind, text) pieces in page order: "text" plain, "button", "option" (a radio label), "product" (a result's id).
_Piece = tuple[str, str]


def original_pieces(state: ShopState) -> list[_Piece]:
    """The visible strings of WebShop's page for ``state`` in reading order, as its templates lay them out."""
    products = state.order.shop.catalogue.products
    page = state.page
    head: list[_Piece] = [("text", "Instruction:"), ("text", state.order.instruction())]
    if state.order.has_cart and state.cart:
        names = "; ".join(f"{products[p].pid} {_selection(products[p].dims, sel)}".rstrip() for p, sel in state.cart)
        head.append(("text", f"Cart ({len(state.cart)}): {names}"))
    if page == SEARCH:
        # The search page's heading has a trailing space before its <br> ("Instruction: ").
        out: list[_Piece] = [("text", "WebShop"), ("text", "Instruction: "), *head[1:]]
        out.append(("button", "Search"))
        if state.cart:
            out.append(("button", CHECKOUT))
        return out
    if page == DONE:
        return [("text", "Thank you for shopping with us!"), ("text", "Your score (min 0.0, max 1.0)"),
                ("text", str(state.outcome()))]  # fmt: skip
    out = [*head, ("button", BACK)]
    if page == RESULTS:
        out.append(("text", f"Page {state.page_no + 1} (Total results: {len(state.results)})"))
        if state.page_no > 0:
            out.append(("button", PREV))
        if state.has_next_page():
            out.append(("button", NEXT))
        for i in state.page_results():
            p = products[i]
            out += [("product", p.pid), ("text", p.title), ("text", p.price_text())]
        return out
    p = products[state.product]
    out.append(("button", PREV))
    if page == ITEM:
        for dim, values in p.options:
            out.append(("text", dim))
            out += [("option", v) for v in values]
        out += [("text", p.title), ("text", f"Price: {p.price_text()}"), ("text", f"Rating: {p.rating:.1f}")]
        out += [("button", t) for t in TABS]
        if state.order.has_cart:
            out.append(("button", ADD))
        out.append(("button", BUY))
    elif state.tab == "Description":
        out.append(("text", p.description()))
    elif state.tab == "Features":
        out += [("text", " " + b) for b in p.bullets()]  # the template's "<p> {{bulletpoint}}</p>"
    else:
        for review in p.reviews():
            stars, _, body = review.partition(" stars: ")
            out += [("text", f'"{body.rstrip(".")}"'), ("text", stars), ("text", body)]
    return out


def original_text(state: ShopState, rich: bool = False) -> str:
    """WebShop's ``text`` (simple) or ``text_rich`` observation of the page."""
    pieces = original_pieces(state)
    if not rich:
        return " [SEP] ".join(text.strip() for _, text in pieces)
    chosen = {v for v in state.selection if v is not None} if state.page == ITEM else set()
    top: list[str] = []
    body: list[str] = []
    for kind, text in pieces:
        if kind == "button":
            body.append(f"[button] {text} [button_]")
        elif kind == "option" and text in chosen:
            body.append(f"  [clicked button] {text} [clicked button_]")
            top.insert(0, f"You have clicked {text}.")  # WebShop prepends each one, so the last comes first
        elif kind == "option":
            body.append(f"  [button] {text} [button_]")
        elif kind == "product":
            opened = state.order.shop.catalogue.by_id[text] in state.visited
            body.append(f"\n[clicked button] {text} [clicked button_]" if opened else f"\n[button] {text} [button_]")
        else:
            body.append(text)
    return "".join(line + "\n" for line in (*top, *body))
