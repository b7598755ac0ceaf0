"""``milepost data webshop``: a web-shop level dataset (train.jsonl, test.jsonl, manifest.json).

Orders of ``--items`` products are drawn from a generated catalogue (``--catalogue-size`` products from
``--catalogue-seed``); levels are ranges of the goal distance, the shortest number of ``search[...]`` /
``click[...]`` actions to a successful purchase. Test orders never share a target product with training orders.
``--difficulty`` picks the catalogue and the instructions: easy (the instruction holds the canonical query word
for word), medium (paraphrased, options per product type, same-title siblings) or hard (every attribute and the
product type in other words, more same-title siblings).

``--from-webshop DIR`` reads WebShop's own files instead (one ``items_shuffle*.json``, one
``items_ins_v2*.json`` and ``items_human_ins.json``) into one-item tasks, one per instruction that milepost can
score exactly, with the instruction's attributes as the canonical query; the converted catalogue is written to
``catalogue.json`` in the dataset folder, which the tasks name. The manifest counts skipped instructions by reason.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from milepost.cli.data_format import add_format_argument, format_flags
from milepost.envs.levels import DEFAULT_LEVELS, parse_levels
from milepost.errors import InputError


def add_parser(envs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = envs.add_parser(
        "webshop",
        help="web-shop level dataset",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--levels", default=None, help="comma list of goal-distance ranges (default: by --items)")
    p.add_argument("--items", type=int, default=1, help="items per order, 1-4 (default 1)")
    p.add_argument("--train", type=int, default=500, help="training tasks per level (default 500)")
    p.add_argument("--test", type=int, default=100, help="test tasks per level (default 100)")
    p.add_argument("--seed", type=int, default=0, help="seed of the orders and the split (default 0)")
    p.add_argument("--catalogue-seed", type=int, default=0, help="seed of the catalogue (default 0)")
    p.add_argument("--catalogue-size", type=int, default=1000, help="products, 50-100000 (default 1000)")
    p.add_argument(
        "--difficulty", choices=("easy", "medium", "hard"), default="easy", help="tasks' difficulty (default easy)"
    )
    p.add_argument("--from-webshop", default=None, metavar="DIR", help="read WebShop's data files from DIR")
    p.add_argument(
        "--instructions", choices=("human", "generated"), default="human",
        help="--from-webshop: items_human_ins.json (default) or the generated ones of items_ins_v2",
    )  # fmt: skip
    p.add_argument("--out", required=True, help="dataset folder to write")
    add_format_argument(p)
    p.add_argument("--overwrite", action="store_true", help="replace an existing non-empty folder")
    p.set_defaults(func=run)


def _check_out(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite and (not out.is_dir() or any(out.iterdir())):
        raise InputError(f"{out} already exists and is not empty (pass --overwrite to replace it)")


def run_from_webshop(args: argparse.Namespace) -> int:
    from milepost.datasets import write_dataset
    from milepost.envs.webshop.dataset import build_original_dataset
    from milepost.envs.webshop.original import CONVERTED_VERSION, load_webshop
    from milepost.io import atomic_write_json

    out = Path(args.out)
    _check_out(out, args.overwrite)
    source = str(Path(args.from_webshop).resolve())
    loaded = load_webshop(args.from_webshop, seed=args.seed, instructions=args.instructions)
    catalogue_file = str((out / "catalogue.json").resolve())
    command = shlex.join(
        ["milepost", "data", "webshop", "--from-webshop", args.from_webshop, "--instructions", args.instructions,
         "--seed", str(args.seed), "--out", str(out), *format_flags(args)]
    )  # fmt: skip
    splits, manifest = build_original_dataset(loaded, args.seed, catalogue_file, command=command, source=source)
    target = write_dataset(out, splits, manifest, overwrite=args.overwrite, format=args.format)
    products = [p.to_record() for p in loaded.catalogue.products]  # type: ignore[attr-defined]
    atomic_write_json(
        target / "catalogue.json",
        {"format": "milepost-webshop-catalogue", "version": CONVERTED_VERSION, "source": source, "products": products},
    )
    counts, info = manifest["counts"], manifest["instructions"]
    print(f"read {len(products)} products and {info['read']} instructions from {args.from_webshop}")
    print(f"wrote {counts['train']} train and {counts['test']} test tasks to {target}")
    for why, n in info["skipped"].items():
        print(f"  skipped {n}: {why}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.from_webshop is not None:
        return run_from_webshop(args)
    from milepost.datasets import write_dataset
    from milepost.envs.webshop.dataset import build_dataset

    if not 1 <= args.items <= 4:
        raise InputError(f"--items must be in 1-4, got {args.items}")
    spec = args.levels or DEFAULT_LEVELS[("webshop", args.items)]
    levels = parse_levels(spec, "webshop", args.items)
    out = Path(args.out)
    _check_out(out, args.overwrite)
    difficulty = [] if args.difficulty == "easy" else ["--difficulty", args.difficulty]
    command = shlex.join(
        [
            "milepost", "data", "webshop", "--levels", spec, "--items", str(args.items), "--train", str(args.train),
            "--test", str(args.test), "--seed", str(args.seed), "--catalogue-seed", str(args.catalogue_seed),
            "--catalogue-size", str(args.catalogue_size), *difficulty, "--out", str(out), *format_flags(args),
        ]
    )  # fmt: skip
    splits, manifest = build_dataset(
        levels, args.items, args.train, args.test, args.seed,
        catalogue_seed=args.catalogue_seed, catalogue_size=args.catalogue_size, command=command,
        difficulty=args.difficulty,
    )  # fmt: skip
    target = write_dataset(out, splits, manifest, overwrite=args.overwrite, format=args.format)
    counts = manifest["counts"]
    print(f"wrote {counts['train']} train and {counts['test']} test tasks to {target}")
    for name, info in manifest["levels"].items():
        print(f"  level {name}: train {info['counts']['train']}, test {info['counts']['test']}")
    return 0
