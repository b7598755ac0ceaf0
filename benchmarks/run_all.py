"""Run every ``benchmarks/bench_*.py`` module's ``main()`` in turn.

Usage: ``python benchmarks/run_all.py [--only NAME ...] [--list]``. Each module is loaded from its file (the
benchmarks folder is not a package) and its ``main()`` is called with no arguments, i.e. its defaults. A
failing benchmark is reported and the others still run; the exit status is 1 if any failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent


def discover() -> list[Path]:
    """The benchmark modules, by name."""
    return sorted(HERE.glob("bench_*.py"))


def load(path: Path) -> ModuleType:
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))  # so that a benchmark can import baselines/
    spec = importlib.util.spec_from_file_location(f"benchmarks_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", default=None, help="benchmark names, e.g. sudoku rushhour")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    args = parser.parse_args(argv)
    paths = discover()
    if args.only:
        wanted = {name.removeprefix("bench_") for name in args.only}
        unknown = wanted - {p.stem.removeprefix("bench_") for p in paths}
        if unknown:
            parser.error(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
        paths = [p for p in paths if p.stem.removeprefix("bench_") in wanted]
    if args.list:
        print("\n".join(p.stem.removeprefix("bench_") for p in paths))
        return 0
    failed: list[str] = []
    for path in paths:
        print(f"== {path.stem} ==", flush=True)
        start = time.perf_counter()
        try:
            load(path).main()
        except Exception:
            traceback.print_exc()
            failed.append(path.stem)
        print(f"== {path.stem}: {time.perf_counter() - start:.0f} s ==", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
