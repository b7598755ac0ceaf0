"""Every registered environment, policy kind and model backend appears in the ``--help`` that lists them, so the
help cannot drift from the registries (``milepost/cli/registry_help.py`` reads them)."""

from __future__ import annotations

import argparse
import functools
import inspect
import re

import pytest

from milepost.backends import BACKENDS
from milepost.backends.base import POLICY_FORMS, POLICY_KINDS, parse_policy_spec
from milepost.cli.data import SUBCOMMANDS
from milepost.cli.main import build_parser
from milepost.envs import ENVS
from milepost.envs.levels import LEVELS, SIZE_MEANING, sizes_of
from milepost.errors import InputError
from milepost.planning.planner import LLM_BACKENDS
from milepost.training.config import ROLLOUT_BACKENDS


@functools.cache
def _root() -> argparse.ArgumentParser:
    return build_parser()  # built once: every subcommand's module is imported to build it


def _parser(*command: str) -> argparse.ArgumentParser:
    parser = _root()
    for name in command:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _help(*command: str) -> str:
    """The command's ``--help`` on single spaces (argparse wraps lines)."""
    return " ".join(_parser(*command).format_help().split())


def _option(command: tuple[str, ...], flag: str) -> str:
    """One option's help as ``--help`` prints it (and checked to be printed)."""
    action = next(a for a in _parser(*command)._actions if flag in a.option_strings or a.dest == flag)
    text = " ".join(str(action.help).split())
    assert text in _help(*command)
    return text


def test_the_registries_are_what_the_help_describes() -> None:
    # Not empty, and every model backend has a written form that parse_policy_spec accepts.
    assert {"sudoku", "rushhour", "webshop"} <= set(ENVS.names())
    assert set(BACKENDS.names()) <= set(POLICY_KINDS) == set(POLICY_FORMS)
    assert set(LLM_BACKENDS) <= set(BACKENDS.names()) and set(ROLLOUT_BACKENDS) <= set(BACKENDS.names())
    for kind in POLICY_KINDS:
        form = POLICY_FORMS[kind].replace("[:MODE]", ":mixed").replace(":P", ":0.5")
        form = form.replace("PATH", "some/model").replace("MODEL@BASE_URL", "m@http://127.0.0.1:1/v1")
        assert parse_policy_spec(form).kind == kind
    with pytest.raises(InputError, match=re.escape(", ".join(POLICY_FORMS[k] for k in POLICY_KINDS[:-1]))):
        parse_policy_spec("nonsense:1")


@pytest.mark.parametrize(
    ("command", "flag"),
    [(("eval",), "--env"), (("plan",), "--env"), (("credit", "audit"), "--env"), (("play",), "env")],
)
def test_every_environment_is_in_the_help(command: tuple[str, ...], flag: str) -> None:
    text = _option(command, flag)
    for name in ENVS.names():
        assert name in text, f"milepost {' '.join(command)} --help: {flag} does not list {name}"


@pytest.mark.parametrize(("command",), [(("eval",),), (("horizon",),), (("credit", "audit"),)])
def test_every_policy_kind_and_backend_is_in_the_policy_help(command: tuple[str, ...]) -> None:
    text = _option(command, "--policy")
    for kind in POLICY_KINDS:
        assert POLICY_FORMS[kind] in text, f"milepost {' '.join(command)} --help: --policy omits {kind}"
    for name in BACKENDS.names():
        assert f"{name}:" in text


def test_planner_and_judge_help_name_the_backends_they_accept() -> None:
    for flag in ("--planner", "--judge"):
        option = _option(("eval",), flag)
        for kind in LLM_BACKENDS:
            assert POLICY_FORMS[kind] in option, f"eval --help: {flag} omits {kind}"
    assert all(POLICY_FORMS[k] in _option(("plan",), "--planner") for k in LLM_BACKENDS)
    rollout = _option(("memory",), "--rollout")
    assert all(name in rollout for name in ROLLOUT_BACKENDS)


def test_play_size_help_speaks_of_every_environment() -> None:
    text = _option(("play",), "--size")
    for name in ENVS.names():
        sizes = sizes_of(name)
        assert sizes and LEVELS.keys() >= {(name, s) for s in sizes}
        default = inspect.signature(ENVS.get(name)).parameters["size"].default
        assert default in sizes, f"{name}: default size {default} has no levels"
        said = f"{name}: {SIZE_MEANING[name]} {' | '.join(map(str, sizes))}"
        assert said in text, f"play --help: --size says nothing of {name} ({said!r})"


def test_every_environment_has_a_data_subcommand() -> None:
    text = _help("data")
    envs = next(a for a in _root()._actions if isinstance(a, argparse._SubParsersAction))
    data = envs.choices["data"]
    names = next(a for a in data._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert set(names) == set(ENVS.names()), f"milepost data lists {sorted(names)}, registered {ENVS.names()}"
    assert len(SUBCOMMANDS) == len(ENVS) and all(name in text for name in ENVS.names())
