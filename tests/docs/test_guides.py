"""Every command block of README.md and docs/*.md runs, at a tiny size, or says in the docs why it does not.

A fenced ```bash / ```sh / ```console block is collected with the marker on the line right above it:

- no marker: the default suite runs it (it must take seconds);
- ``<!-- slow: REASON -->``: ``make test-slow`` runs it (``-m slow``);
- ``<!-- not-tested: REASON -->``: never run (a GPU, a server that does not return, an interactive terminal, a
  venv of its own); the reason is written where a reader sees it.

All blocks run in one workspace per session, in document order (README.md, then docs/*.md by name), so a guide
reuses the datasets an earlier block made; a block first runs the earlier blocks of its set that have not run
(so ``-k`` selection works), and a command already run in the workspace is not run again. ``checkpoints/``,
``configs/`` and ``docs/examples/`` are linked in read-only; everything a command writes lands in the workspace.

A block whose commands are all plain ``milepost ...`` lines runs in this process through ``milepost.cli.main``
(an import of torch per command would cost seconds; leading ``NAME=value`` words set the environment; output
goes to a buffer, so no progress bar is drawn), shrunk to a tiny size: ``--train`` at most 8 and ``--test`` at
most 4 (``data``), ``--limit 1`` and ``--n`` at most 2 with ``--k`` cut to match (``eval``, ``credit audit``),
``--workers 1`` (``data rushhour``), and a few iterations / tasks / samples for ``train`` and ``sft`` (the
``--set`` overrides in ``_TRAIN_SHRINK``). Any other block runs as written under ``bash -e`` with this
interpreter's ``bin`` first on ``PATH`` and the repository on ``PYTHONPATH``. Either way the exit status must be 0.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!--\s*(slow|not-tested)\s*:\s*(.+?)\s*-->$")
SHELL_LANGS = {"bash", "sh", "console", "shell"}
SHELL_SYNTAX = re.compile(r"[|&;<>$`(){}]")
ENV_ASSIGN = re.compile(r"^[A-Za-z_]\w*=")
LINKED = ["checkpoints", "configs", "docs/examples"]

# `milepost train` / `milepost sft` at a tiny size: one iteration of two tasks x two samples, one short SFT pass.
_TRAIN_SHRINK = [
    "rl.iterations=1",
    "rl.tasks_per_iter=2",
    "rl.samples_per_task=2",
    "rl.minibatches=1",
    "eval.limit=1",
    "eval.n=1",
    "eval.ks=[1]",
]
_SFT_SHRINK = ["sft.tasks=4", "sft.epochs=1"]


@dataclass(frozen=True)
class Block:
    doc: str  # path relative to the repository
    line: int  # line of the opening fence
    kind: str  # "fast" | "slow" | "not-tested"
    reason: str
    commands: tuple[str, ...]  # continuation lines joined, comments and blank lines dropped
    text: str  # the block as written (for bash)

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def _commands(lines: list[str], lang: str) -> list[str]:
    out: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.rstrip()
        if lang == "console":
            if not line.startswith("$ ") and not pending:
                continue  # output lines
            line = line[2:] if line.startswith("$ ") else line
        if not pending and line.lstrip().startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command:
            out.append(command)
    return out


def collect(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or not m.group(1):
            if m:  # an unlabelled fence: skip to its end
                i += 1
                while i < len(lines) and not lines[i].startswith("```"):
                    i += 1
            i += 1
            continue
        lang, start = m.group(1), i
        i += 1
        body: list[str] = []
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        i += 1
        if lang not in SHELL_LANGS:
            continue
        above = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        mark = MARKER.match(above)
        kind, reason = (mark.group(1), mark.group(2)) if mark else ("fast", "")
        blocks.append(
            Block(str(path.relative_to(ROOT)), start + 1, kind, reason, tuple(_commands(body, lang)), "\n".join(body))
        )
    return blocks


BLOCKS = [b for doc in DOCS for b in collect(doc)]


def _in_process(block: Block) -> bool:
    for command in block.commands:
        if SHELL_SYNTAX.search(command.split(" #")[0]):
            return False
        try:
            argv = shlex.split(command, comments=True)
        except ValueError:
            return False
        while argv and ENV_ASSIGN.match(argv[0]):
            argv = argv[1:]
        if not argv or argv[0] != "milepost":
            return False
    return True


def _value(argv: list[str], flag: str) -> int | None:
    return argv.index(flag) + 1 if flag in argv else None


def _cap(argv: list[str], flag: str, cap: int, add: bool = False) -> None:
    at = _value(argv, flag)
    if at is None:
        if add:
            argv += [flag, str(cap)]
    elif int(argv[at]) > cap:
        argv[at] = str(cap)


def shrink(argv: list[str]) -> list[str]:
    """A documented command at a tiny size (see the module docstring)."""
    argv = list(argv)
    verb = argv[1:3]
    if verb[:1] == ["data"]:
        _cap(argv, "--train", 8)
        _cap(argv, "--test", 4)
        if verb[1:] == ["rushhour"]:
            _cap(argv, "--workers", 1, add=True)
    if verb[:1] == ["eval"] or (verb == ["credit", "audit"] and "--data" in argv):
        if "--probe" not in argv:
            _cap(argv, "--limit", 1, add=True)
        _cap(argv, "--n", 2)
        at_n = _value(argv, "--n")
        n = int(argv[at_n]) if at_n is not None else 1
        at = _value(argv, "--k")
        if at is not None:
            ks = [k for k in argv[at].split(",") if int(k) <= n]
            argv[at] = ",".join(ks or ["1"])
    if verb[:1] == ["train"]:
        for s in _TRAIN_SHRINK:
            argv += ["--set", s]
    if verb[:1] == ["sft"]:
        for s in _SFT_SHRINK:
            argv += ["--set", s]
    return argv


class Workspace:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.done_blocks: set[str] = set()
        self.done_commands: set[str] = set()
        for rel in LINKED:
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).symlink_to(ROOT / rel)

    def run(self, block: Block) -> None:
        if block.id in self.done_blocks:
            return
        if _in_process(block):
            for command in block.commands:
                argv = shlex.split(command, comments=True)
                key = shlex.join(argv)  # the same command with another trailing comment is the same command
                if key in self.done_commands:
                    continue
                env = {}
                while ENV_ASSIGN.match(argv[0]):
                    name, _, value = argv.pop(0).partition("=")
                    env[name] = value
                self._milepost(shrink(argv), block, env)
                self.done_commands.add(key)
        else:
            self._bash(block)
        self.done_blocks.add(block.id)

    def _milepost(self, argv: list[str], block: Block, env: dict[str, str]) -> None:
        from milepost.cli.main import main

        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        saved = {name: os.environ.get(name) for name in env}
        os.environ.update(env)
        os.chdir(self.path)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    rc = main(argv[1:])
                except SystemExit as exc:  # --help
                    rc = exc.code if isinstance(exc.code, int) else 0
        finally:
            os.chdir(cwd)
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        assert rc == 0, f"{block.id}: `{shlex.join(argv)}` exited {rc}\n{err.getvalue()[-3000:]}"

    def _bash(self, block: Block) -> None:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{env.get('PYTHONPATH', '')}".rstrip(os.pathsep)
        proc = subprocess.run(
            ["bash", "-e", "-c", block.text], cwd=self.path, env=env, capture_output=True, text=True, timeout=3600
        )
        assert proc.returncode == 0, f"{block.id} exited {proc.returncode}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return Workspace(tmp_path_factory.mktemp("guides"))


def _run_upto(workspace: Workspace, block: Block, kinds: set[str]) -> None:
    for earlier in BLOCKS[: BLOCKS.index(block)]:
        if earlier.kind in kinds:
            workspace.run(earlier)
    workspace.run(block)


@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "fast"], ids=lambda b: b.id)
def test_fast_block(block: Block, workspace: Workspace) -> None:
    _run_upto(workspace, block, {"fast"})


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.kind == "slow"], ids=lambda b: b.id)
def test_slow_block(block: Block, workspace: Workspace) -> None:
    _run_upto(workspace, block, {"fast", "slow"})


def test_every_block_is_run_or_says_why() -> None:
    """Marked blocks carry a reason; the docs keep some blocks in the default run; every guide is reachable."""
    assert any(b.kind == "fast" for b in BLOCKS)
    for b in BLOCKS:
        assert b.commands, f"{b.id}: an empty command block"
        if b.kind != "fast":
            assert len(b.reason) > 5, f"{b.id}: say why the block is {b.kind}"
    readme = (ROOT / "README.md").read_text()
    for doc in DOCS[1:]:
        assert f"docs/{doc.name}" in readme, f"README.md does not link {doc.name}"


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    heads = [line.lstrip("#").strip() for line in path.read_text().splitlines() if re.match(r"#{1,6} ", line)]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_readme_is_short_and_self_contained() -> None:
    """README.md under 250 lines, nothing outside the repository; every link of the docs lands (anchors too)."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) < 250
    assert "../" not in text, "README.md points outside the repository"
    for doc in DOCS:
        for target, anchor in re.findall(r"\]\(([^)#\s]*)(?:#([^)\s]+))?\)", doc.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            path = (doc.parent / target).resolve() if target else doc
            assert path.is_relative_to(ROOT), f"{doc.name}: {target} leaves the repository"
            assert path.exists(), f"{doc.name}: broken link {target}"
            if anchor and path.suffix == ".md":
                assert anchor in _anchors(path), f"{doc.name}: no heading #{anchor} in {target or doc.name}"


def test_collect_reads_markers_and_commands(tmp_path: Path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text(
        "<!-- slow: minutes -->\n```bash\n# a comment\nmilepost eval --env sudoku \\\n    --n 4  # tail\n```\n\n"
        "```python\nprint()\n```\n<!-- not-tested: needs a GPU -->\n\n```sh\nvllm serve x\n```\n"
        "```console\n$ milepost --help\nusage: ...\n```\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        blocks = collect(doc)
    finally:
        ROOT = saved
    assert [(b.kind, b.reason, b.commands) for b in blocks] == [
        ("slow", "minutes", ("milepost eval --env sudoku      --n 4  # tail",)),
        ("not-tested", "needs a GPU", ("vllm serve x",)),
        ("fast", "", ("milepost --help",)),
    ]
    assert shrink(["milepost", "eval", "--n", "4", "--k", "1,4"]) == [
        "milepost", "eval", "--n", "2", "--k", "1", "--limit", "1"
    ]  # fmt: skip
