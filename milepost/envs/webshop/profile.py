"""Web-shop profiles: which reward, rules and observation strings the shop uses.

``milepost`` (the default) is the shop the rest of milepost was built and measured on: an exact-match reward
(a flat type score of 1 / 0.5 / 0), ``search[...]`` only on the search page, ``Next >`` hidden on the last page,
illegal actions rejected with feedback and a penalty (the ``valid`` reward term), a budget of 15 turns per item,
and observations that show the cart and the selected options. It stays the default because its rules make every
mistake visible to the agent and to the credit audit (a penalised, explained rejection instead of a silent
no-op), and because every result in ``docs/results/`` was measured under it.

``webshop`` reproduces princeton-nlp/WebShop as researchers report it (read from
``web_agent_site/engine/goal.py`` and ``web_agent_site/envs/web_agent_text_env.py``): the original reward
(fuzzy option and attribute matching, the type reward from query, category and title-noun overlap; see
``milepost.envs.webshop.reward``), ``search[...]`` from any page, ``Next >`` on every results page (pages past
the last are empty), WebShop's action grammar read exactly as its text env reads it (``state.parse_original``), any
action the page cannot take a silent no-op with reward 0, no turn budget unless one is
set, and the original ``text`` / ``text_rich`` strings (``[clicked button]`` markers, ``You have clicked X.``).

Success stays the exact purchase of the order under both profiles, so the goal distance means the same thing;
the ``webshop`` reward can give 1.0 to a purchase that is not the ordered product (the fuzzy match), which
WebShop's own success rate (reward == 1) would count as a success.
"""

from __future__ import annotations

from dataclasses import dataclass

from milepost.errors import InputError


@dataclass(frozen=True)
class Profile:
    """The switches one profile sets; the shop's modules read these, never the profile's name."""

    name: str
    original_reward: bool
    """the outcome credit of a purchase: WebShop's get_reward (True) or the exact-match score (False)"""
    search_anywhere: bool
    """search[...] works on every page (WebShop's text env), not only on the search page"""
    next_on_last_page: bool
    """results pages always show Next >; a page past the last lists no products"""
    silent_invalid: bool
    """an action the page cannot take (or text that is no action) leaves the state unchanged, reward 0, no
    feedback; False: a rejected action with the reason and the ``valid`` / ``format`` penalty"""
    budget_per_item: int | None
    """default turn budget H_max per item ordered; None: no budget unless max_steps is set"""
    original_text: bool
    """WebShop's observation strings (no cart or selection lines; ``text_rich`` with clicked markers)"""
    original_grammar: bool = False
    """an answer is read exactly as WebShop's text env reads it (``state.parse_original``: the whole text, no
    ``ACTION:`` segment, no trimming, the tags in lower case only, the empty string a no-op); False: milepost's
    grammar (``state.parse_action`` after the ``ACTION:`` segment, trimmed, tags in any case)"""


MILEPOST = Profile("milepost", False, False, False, False, 15, False)
WEBSHOP = Profile("webshop", True, True, True, True, None, True, original_grammar=True)
PROFILES: dict[str, Profile] = {p.name: p for p in (MILEPOST, WEBSHOP)}
DEFAULT_PROFILE = MILEPOST.name
# Without a budget an episode still needs an end for a runner's loop: this many turns is "unbounded" in practice.
UNBOUNDED_STEPS = 1_000_000


def get_profile(name: str | Profile) -> Profile:
    """The profile called ``name``.

    Raises:
        InputError: an unknown name.
    """
    if isinstance(name, Profile):
        return name
    profile = PROFILES.get(str(name))
    if profile is None:
        raise InputError(f"webshop: unknown profile {name!r} (known: {', '.join(PROFILES)})")
    return profile
