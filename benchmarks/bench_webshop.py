"""Web-shop throughput: environment steps, search queries, catalogue and dataset generation.

* Environment: steps per second of the raw ``WebShopEnv`` on a 10,000-product catalogue, 2-item orders, playing
  precomputed random walks of legal actions (searches with the canonical queries, result pages, products,
  options, tabs, back; never a purchase, so every action of every walk is played), without rendering
  (``observe=False``; target 20,000/s on one core) and with WebShop's text rendering. Best of several runs.
* Search: uncached BM25 queries per second (the canonical queries of generated orders) with the inverted index,
  beside a plain scan of the catalogue (per query, every product's token set is scored by the query words it
  holds) and beside ``rank-bm25``'s ``BM25Okapi`` (scores every document, then the top 50 are sorted), all on
  the same corpus and queries in the same run. WebShop's own search (a Java Lucene index) cannot be installed
  here. The top-10 overlap with rank-bm25 is reported (its idf differs from Lucene's, so ranks may differ).
* Generation: catalogue products per second (index build included) at 10,000 and 100,000 products, and
  dataset tasks per second (``build_dataset``, 1- and 2-item orders).

The process is pinned to one core. Results go to ``benchmarks/results/webshop.{md,json,png}``.
Run: ``python benchmarks/bench_webshop.py [--catalogue N] [--queries Q]``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from common import best_rates, pin_one_core, write_experiment  # noqa: E402

from milepost.envs.levels import parse_levels  # noqa: E402
from milepost.envs.webshop import WebShopEnv  # noqa: E402
from milepost.envs.webshop.catalogue import Catalogue  # noqa: E402
from milepost.envs.webshop.dataset import build_dataset  # noqa: E402
from milepost.envs.webshop.goal import get_shop  # noqa: E402
from milepost.envs.webshop.search import MAX_RESULTS, SearchIndex, tokenize  # noqa: E402
from milepost.envs.webshop.state import ADD, BUY, CHECKOUT  # noqa: E402
from milepost.envs.webshop.tasks import generate_task  # noqa: E402
from milepost.types import Task  # noqa: E402

RESULTS = HERE / "results"
TARGETS = {"env_raw": 20_000.0}
Run = Callable[[], tuple[int, float]]


# -- environment ---------------------------------------------------------------------------------------


def orders(size: int, count: int, k: int, seed: int = 0) -> list[Task]:
    out: list[Task] = []
    index = 0
    while len(out) < count:
        task = generate_task(seed, index, k, catalogue_size=size)
        index += 1
        if task is not None:
            out.append(task)
    return out


def walks(tasks: list[Task], length: int, seed: int) -> list[tuple[Task, list[str]]]:
    """Per task, a random walk of legal actions that never adds to the cart or buys."""
    rng = random.Random(seed)
    env = WebShopEnv(size=tasks[0].size, observe=False, max_steps=10**9)
    out = []
    for task in tasks:
        env.reset(options={"task": task})
        state = env.state.clone()
        actions = []
        for _ in range(length):
            legal = [a for a in state.legal_actions() if a.value not in (ADD, BUY, CHECKOUT)]
            action = rng.choice(legal)
            state.apply(action)
            actions.append(action.text())
        out.append((task, actions))
    return out


def env_run(games: list[tuple[Task, list[str]]], observe: bool) -> Run:
    env = WebShopEnv(size=games[0][0].size, observe=observe, max_steps=10**9)

    def run() -> tuple[int, float]:
        steps, seconds = 0, 0.0
        for task, actions in games:
            env.reset(options={"task": task})
            start = time.perf_counter()
            for action in actions:
                _, _, _, _, info = env.step(action)
            seconds += time.perf_counter() - start
            steps += len(actions)
            if info["error"] is not None:
                raise RuntimeError(f"webshop env: a legal walk was refused: {info['error']}")
        return steps, seconds

    return run


# -- search --------------------------------------------------------------------------------------------


def plain_scan(catalogue: Catalogue) -> Callable[[list[str]], list[int]]:
    """The baseline: per query, score every product by how many query words its token set holds."""
    docs = [frozenset(tokenize(p.search_text())) for p in catalogue.products]

    def search(tokens: list[str]) -> list[int]:
        scored = [(-sum(t in doc for t in tokens), i) for i, doc in enumerate(docs)]
        return [i for s, i in sorted(x for x in scored if x[0] < 0)[:MAX_RESULTS]]

    return search


def search_runs(catalogue: Catalogue, queries: list[str]) -> tuple[dict[str, Run | None], dict[str, Any]]:
    index = SearchIndex(catalogue)
    tokenized = [tokenize(q) for q in queries]
    scan = plain_scan(catalogue)
    runs: dict[str, Run | None] = {}

    def timed(fn: Callable[[list[str]], object]) -> Run:
        def run() -> tuple[int, float]:
            start = time.perf_counter()
            for tokens in tokenized:
                fn(tokens)
            return len(tokenized), time.perf_counter() - start

        return run

    runs["milepost"] = timed(lambda tokens: index._rank(tuple(tokens)))
    runs["plain scan"] = timed(scan)
    info: dict[str, Any] = {"rank_bm25": None}
    try:
        from rank_bm25 import BM25Okapi
    except ImportError:
        runs["rank-bm25"] = None
        return runs, info
    bm25 = BM25Okapi([tokenize(p.search_text()) for p in catalogue.products])

    def peer(tokens: list[str]) -> list[int]:
        scores = bm25.get_scores(tokens)
        hits = np.flatnonzero(scores > 0)
        return [int(i) for i in hits[np.lexsort((hits, -scores[hits]))][:MAX_RESULTS]]

    runs["rank-bm25"] = timed(peer)
    overlap = [len(set(peer(t)[:10]) & set(index._rank(tuple(t))[:10])) / 10 for t in tokenized[:100]]
    info["rank_bm25"] = {"top10_overlap": float(np.mean(overlap))}
    return runs, info


# -- generation ----------------------------------------------------------------------------------------


def bench_generation(sizes: Sequence[int], tasks: int) -> dict[str, float]:
    rates: dict[str, float] = {}
    for size in sizes:
        start = time.process_time()
        SearchIndex(Catalogue(1, size))
        rates[f"catalogue + index products/s ({size:,})"] = size / (time.process_time() - start)
    for k, spec in ((1, "3-5"), (2, "6-8,9-11")):
        levels = parse_levels(spec, "webshop", k)
        get_shop(0, 10_000)
        start = time.process_time()
        splits, _ = build_dataset(levels, k, tasks, tasks // 4, 0, catalogue_seed=0, catalogue_size=10_000)
        made = sum(len(v) for v in splits.values())
        rates[f"dataset tasks/s ({k}-item orders, 10,000 products)"] = made / (time.process_time() - start)
    return rates


# -- report --------------------------------------------------------------------------------------------


def _fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:,.2f}"


def rows_of(r: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []

    def add(measure: str, ours: float, peer: float | None, peer_name: str, target: str, ok: bool | None) -> None:
        rows.append(
            {"measure": measure, "milepost": ours, "peer": peer, "peer_name": peer_name,
             "ratio": ours / peer if peer else None, "target": target, "met": ok}
        )  # fmt: skip

    env, search = r["env"], r["search"]
    add("env steps/s, no rendering", env["raw"], None, "", ">= 20,000/s", env["raw"] >= TARGETS["env_raw"])
    add("env steps/s, text rendering", env["rendered"], None, "", "-", None)
    add("search queries/s (uncached)", search["milepost"], search["plain scan"], "plain scan", "faster", None)
    add("search queries/s (uncached)", search["milepost"], search["rank-bm25"], "rank-bm25 BM25Okapi", "faster",
        None)  # fmt: skip
    for name, rate in r["generation"].items():
        add(name, rate, None, "", "-", None)
    for row in rows:
        if row["target"] == "faster" and row["ratio"] is not None:
            row["met"] = row["ratio"] > 1.0
    return rows


def markdown(result: dict[str, Any]) -> str:
    meta, r = result["meta"], result["results"]
    overlap = r["search_info"]["rank_bm25"]
    lines = [
        "# Web-shop throughput",
        "",
        f"{meta['date']}, Python {meta['python']}, {meta['machine']}, {meta['pinned']}. Environment: "
        f"{meta['catalogue']:,}-product catalogue, {meta['env_tasks']} two-item orders, {meta['env_steps']:,} "
        f"steps per run, best of {meta['repeats']} runs. Search: {meta['queries']} canonical queries, uncached, "
        f"same corpus for all three"
        + (f"; top-10 overlap with rank-bm25 {overlap['top10_overlap']:.0%} (its idf differs)." if overlap else "."),
        "",
        "| measure | milepost | peer | peer figure | ratio | target | met |",
        "| --- | ---: | --- | ---: | ---: | --- | --- |",
    ]
    for row in result["rows"]:
        ratio = "-" if row["ratio"] is None else f"{row['ratio']:.1f}x"
        met = "-" if row["met"] is None else "yes" if row["met"] else "NO"
        lines.append(
            f"| {row['measure']} | {_fmt(row['milepost'])} | {row['peer_name'] or '-'} | {_fmt(row['peer'])} | "
            f"{ratio} | {row['target']} | {met} |"
        )
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    bars = [(f"{row['measure']}\nvs {row['peer_name']}", row["ratio"]) for row in rows if row["ratio"]]
    raw = rows[0]
    bars.append(("env steps/s, no rendering\nvs target 20,000/s", raw["milepost"] / TARGETS["env_raw"]))
    fig, ax = plt.subplots(figsize=(8, 0.7 * len(bars) + 1.5))
    ax.barh(range(len(bars)), [v for _, v in bars], color="tab:green")
    ax.set_yticks(range(len(bars)), [label for label, _ in bars], fontsize=7)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.axvline(1.0, color="grey", linewidth=0.8)
    for i, (_, v) in enumerate(bars):
        ax.text(v, i, f" {v:.1f}x", va="center", fontsize=7)
    ax.set_xlabel("ratio (milepost / peer, or / target figure), log scale")
    ax.set_title("Web shop throughput, one core")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: Sequence[str] = ()) -> dict[str, Any]:
    """Run the web-shop benchmarks, print the table and write ``benchmarks/results/webshop.*``."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--catalogue", type=int, default=10_000, help="products (default 10,000)")
    parser.add_argument("--env-tasks", type=int, default=10, help="orders walked in the environment runs")
    parser.add_argument("--env-steps", type=int, default=2000, help="actions per walk")
    parser.add_argument("--queries", type=int, default=300, help="search queries (default 300)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per configuration (best is kept)")
    parser.add_argument("--gen-sizes", default="10000,100000", help="catalogue sizes for the generation rate")
    parser.add_argument("--gen-tasks", type=int, default=200, help="training tasks per level for the dataset rate")
    parser.add_argument("--out", default=str(RESULTS), help="results folder")
    args = parser.parse_args(list(argv))
    pinned = pin_one_core()
    print("webshop benchmark: environment ...", file=sys.stderr)
    tasks = orders(args.catalogue, args.env_tasks, 2)
    games = walks(tasks, args.env_steps, seed=0)
    env = best_rates({"raw": env_run(games, False), "rendered": env_run(games, True)}, args.repeats)
    print("webshop benchmark: search ...", file=sys.stderr)
    shop = get_shop(0, args.catalogue)
    queries = [item["query"] for t in orders(args.catalogue, args.queries, 1, seed=5) for item in t.payload["items"]]
    runs, search_info = search_runs(shop.catalogue, queries)
    search = best_rates(runs, args.repeats)
    print("webshop benchmark: generation ...", file=sys.stderr)
    generation = bench_generation([int(s) for s in args.gen_sizes.split(",") if s], args.gen_tasks)
    results = {"env": env, "search": search, "search_info": search_info, "generation": generation}
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "pinned": pinned,
        "catalogue": args.catalogue,
        "env_tasks": len(games),
        "env_steps": len(games) * args.env_steps,
        "queries": len(queries),
        "repeats": args.repeats,
    }
    result = {"meta": meta, "results": results, "rows": rows_of(results)}
    text = write_experiment(Path(args.out), "webshop", result, markdown, plot)
    print(text)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
