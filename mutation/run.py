"""``make mutation``: run mutmut over each group of mutation/config.toml, print a score per module, gate on it.

Each group runs in its own copy of the package and tests (``mutation/.work/<group>``), with a ``[tool.mutmut]``
section naming the group's modules and the tests that guard them (``skip_lines``: regexes of lines whose
expressions stay unmutated; ``skip_functions``: names of functions left unmutated whole, marked in the copy;
``copy``: other paths the tests read, such as a checkpoint);
mutmut then runs, for every mutant, only the selected tests that reach the mutated function. Mutants listed in
``mutation/equivalent.md`` (no behaviour change) leave the denominator; everything else that survives, or that no
selected test reaches, counts as not killed.

    python mutation/run.py [--children N] [--group NAME ...] [--report-only]

Exit status 1 when a score falls below its floor or a group fails to run.
"""

from __future__ import annotations

import argparse
import ast
import io
import os
import re
import shutil
import subprocess
import sys
import time
import tokenize
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "mutation"
WORK = HERE / ".work"
# A mutant line of `mutmut results --all true`: "    milepost.training.returns.x_normalise__mutmut_5: survived"
RESULT = re.compile(r"^\s*(\S+__mutmut_\d+): (.+?)\s*$")
# An entry of equivalent.md: "- `milepost.training.returns.x_normalise__mutmut_5`: why"
EQUIVALENT = re.compile(r"^- `(\S+__mutmut_\d+)`")


@dataclass
class Score:
    name: str
    module: str
    minimum: float
    functions: list[str] = field(default_factory=list)

    def covers(self, mutant: str) -> bool:
        if not mutant.startswith(self.module + "."):
            return False
        if not self.functions:
            return True
        local = mutant[len(self.module) + 1 :].split("__mutmut_")[0]  # x_name or xǁClassǁmethod
        return any(local == f"x_{f}" or local.endswith(f"ǁ{f}") for f in self.functions)


def mutmut_section(group: dict) -> str:
    """The ``[tool.mutmut]`` table of one group (``skip_lines``: regexes of lines left unmutated)."""

    def toml_list(items: list[str]) -> str:
        return "[" + ", ".join(f"'{i}'" for i in items) + "]"  # TOML literal strings: regexes stay as written

    return (
        "\n\n[tool.mutmut]\n"
        "source_paths = ['milepost']\n"
        f"only_mutate = {toml_list(group['modules'])}\n"
        f"do_not_mutate_patterns = {toml_list(group.get('skip_lines', []))}\n"
        f"pytest_add_cli_args_test_selection = {toml_list(group['tests'])}\n"
        f"also_copy = {toml_list(group.get('copy', []))}\n"
        "pytest_add_cli_args = ['-p', 'no:cacheprovider', '-q']\n"
    )


def run_group(group: dict, children: int, report_only: bool = False) -> dict[str, str]:
    """Run mutmut for one group in a fresh copy (or only read the last run's results); {mutant: status}."""
    work = WORK / group["name"]
    mutmut = str(Path(sys.executable).parent / "mutmut")
    env = os.environ | {"MILEPOST_CI": "1", "PYTHONPATH": str(work)}
    if not report_only:
        run_mutmut(group, work, mutmut, env, children)
    res = subprocess.run([mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True)
    out: dict[str, str] = {}
    for line in res.stdout.splitlines():
        m = RESULT.match(line)
        if m:
            out[m[1]] = m[2]
    if not out:
        raise RuntimeError(f"mutmut reported no mutants for group {group['name']}: {res.stdout[-2000:]}")
    return out


def run_mutmut(group: dict, work: Path, mutmut: str, env: dict[str, str], children: int) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", ".hypothesis", "*.pyc")
    shutil.copytree(ROOT / "milepost", work / "milepost", ignore=ignore)
    shutil.copytree(ROOT / "tests", work / "tests", ignore=ignore)
    for extra in group.get("copy", []):  # files the tests read (e.g. a checkpoint), copied on into mutants/
        (work / extra).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / extra).is_dir():
            shutil.copytree(ROOT / extra, work / extra)
        else:
            shutil.copy2(ROOT / extra, work / extra)
    for module in group["modules"]:
        protect_functions(work / module, group.get("skip_functions", []))
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    (work / "pyproject.toml").write_text(pyproject + mutmut_section(group), "utf-8")
    log = work / "mutmut.log"
    with log.open("w") as out:
        command = [mutmut, "run", "--max-children", str(children)]
        proc = subprocess.run(command, cwd=work, env=env, stdout=out, stderr=out)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"mutmut run failed for group {group['name']} (exit {proc.returncode}):\n{tail}")


def protect_functions(path: Path, names: list[str]) -> None:
    """Mark every line of the functions (and methods) called ``names`` in ``path`` with ``# pragma: no mutate``
    (in the group's copy only): mutmut's ``do_not_mutate_patterns`` skip expressions line by line, and a
    function's body is not one line. The comment goes where Python allows one (a line that ends a statement or
    breaks inside brackets), never inside a string."""
    if not names:
        return
    source = path.read_text(encoding="utf-8")
    spans = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in names
    ]
    ends = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type in (tokenize.NEWLINE, tokenize.NL)
    }
    lines = source.splitlines()
    for first, last in spans:
        for number in range(first, last + 1):
            if number in ends and lines[number - 1].strip():
                lines[number - 1] += "  # pragma: no mutate"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def equivalents() -> dict[str, str]:
    path = HERE / "equivalent.md"
    found = {}
    for line in path.read_text(encoding="utf-8").splitlines() if path.exists() else []:
        m = EQUIVALENT.match(line)
        if m:
            found[m[1]] = line
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--children", type=int, default=os.cpu_count() or 2, help="parallel mutants (default: CPUs)")
    parser.add_argument("--group", action="append", help="run only these groups (default: all)")
    parser.add_argument("--report-only", action="store_true", help="score the last run's results again")
    args = parser.parse_args(argv)
    config = tomllib.loads((HERE / "config.toml").read_text(encoding="utf-8"))
    groups = [g for g in config["group"] if not args.group or g["name"] in args.group]
    scores = [Score(s["name"], s["module"], float(s["min"]), list(s.get("functions", []))) for s in config["score"]]
    results: dict[str, str] = {}
    for group in groups:
        start = time.perf_counter()
        got = run_group(group, args.children, args.report_only)
        counts = Counter(got.values())
        print(f"group {group['name']}: {len(got)} mutants in {time.perf_counter() - start:.0f} s {dict(counts)}")
        results |= got
    equivalent = equivalents()
    stale = sorted(m for m in equivalent if results.get(m, "survived") != "survived")
    for name in stale:
        print(f"note: {name} is listed as equivalent but was {results[name]}: remove it from equivalent.md")
    failed = False
    print(f"\n{'module':<50} {'killed':>7} {'surv':>5} {'no test':>7} {'equiv':>5} {'score':>6} {'min':>6}")
    for score in scores:
        mine = {m: s for m, s in results.items() if score.covers(m)}
        if not mine:
            continue
        equiv = sum(1 for m in mine if m in equivalent and mine[m] == "survived")
        killed = sum(1 for s in mine.values() if s == "killed")
        survived = sum(1 for s in mine.values() if s == "survived") - equiv
        untested = sum(1 for s in mine.values() if s == "no tests")
        other = len(mine) - equiv - killed - survived - untested  # timeouts, suspicious, segfaults
        value = killed / max(len(mine) - equiv, 1)
        low = value < score.minimum
        failed |= low
        flag = "  BELOW" if low else ""
        print(
            f"{score.name:<50} {killed:>7} {survived + other:>5} {untested:>7} {equiv:>5} "
            f"{value:>6.1%} {score.minimum:>6.0%}{flag}"
        )
    survivors = sorted(m for m, s in results.items() if s != "killed" and m not in equivalent)
    (WORK / "survivors.txt").write_text("".join(f"{m}: {results[m]}\n" for m in survivors), encoding="utf-8")
    print(f"\nnot killed and not listed as equivalent: {len(survivors)} (mutation/.work/survivors.txt;")
    print("`cd mutation/.work/<group> && ../../../.venv/bin/mutmut show NAME` shows one)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
