"""``milepost credit audit``: score every advantage estimator against the exact per-turn progress.

``milepost credit audit RUN_DIR --out DIR`` reads an evaluation run's ``episodes.jsonl`` (or a training run's
first and last ``eval-NNNNNN`` folders), gives every turn the advantage of each estimator (the paper's, with and
without subgoal-segmented returns, GRPO-style, MiRA's potential shaping, GAE and doubly-robust with cross-fitted
critics, GiGPO, the solver's distance, random) and ranks them by their correlation with the optimal advantage
A* = d(s_t) - d(s_t+1) - c_t from the environment's exact goal distance. Writes ``credit.md``, ``credit.png`` and
``credit.json`` (keyed by estimator name: ``spearman``, ``kendall``, ``sign``, ``length_bias``, intervals).

``milepost credit audit --policy SPEC --env ENV --data DIR --out DIR`` first plays the episodes (as ``milepost
eval`` does, into ``DIR/episodes/``; a rerun resumes) and then audits them.

``milepost credit audit --rollouts FILE --env ENV --data DIR --out DIR [--format milepost|verl|trl|verifiers]``
audits another framework's rollouts: each line's task id, each turn's answer text and the framework's own
advantage per turn (``milepost.evaluation.rollouts_import`` documents the JSONL and what each converter reads).
The turns are replayed in the environment for their exact distances, and the framework's advantages are one
more row of the table, ``imported``, beside milepost's estimators on the same turns.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from milepost.cli.registry_help import env_names, policy_help
from milepost.errors import InputError


def add_parser(sub: argparse._SubParsersAction) -> None:
    from milepost.evaluation.credit import ESTIMATORS

    p = sub.add_parser(
        "credit",
        help="audit advantage estimators against the exact goal distance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub2 = p.add_subparsers(dest="credit_command", metavar="audit", required=True)
    a = sub2.add_parser("audit", help="score every estimator's per-turn credit against A*", description=__doc__)
    a.add_argument("run", nargs="?", default=None, help="an eval run folder (or its episodes.jsonl), or a training run")
    a.add_argument("--out", required=True, help="report folder (credit.md, credit.png, credit.json)")
    a.add_argument(
        "--estimators", default=",".join(ESTIMATORS), help=f"comma list (default all: {', '.join(ESTIMATORS)})"
    )
    a.add_argument("--boot", type=int, default=200, help="bootstrap resamples over tasks (default 200; 0: none)")
    a.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    a.add_argument("--critic-epochs", type=float, default=4.0, help="passes over a fold when training critics")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument(
        "--rollouts", default=None, help="audit another framework's rollouts (JSONL; needs --env and --data)"
    )
    a.add_argument(
        "--format",
        default="milepost",
        choices=("milepost", "verl", "trl", "verifiers"),
        help="--rollouts file format: milepost's JSONL (default), verl's rollout dump, TRL's completions "
        "log (parquet), verifiers' traces.jsonl",
    )
    play = a.add_argument_group("play the episodes first (instead of RUN)")
    play.add_argument("--policy", default=None, help=policy_help())
    play.add_argument("--env", default=None, help=f"environment of --data: {env_names()}")
    play.add_argument("--data", default=None, help="dataset folder (from `milepost data`)")
    play.add_argument("--split", default="test")
    play.add_argument("--levels", default=None)
    play.add_argument("--limit", type=int, default=None, help="tasks per level at most")
    play.add_argument("--n", type=int, default=4, help="samples per task (groups for GRPO and GiGPO)")
    play.add_argument("--max-steps", type=int, default=None)
    a.add_argument("--no-progress", action="store_true")
    a.set_defaults(func=run)


def _episodes_of(args: argparse.Namespace) -> list[tuple[str, Path, list]]:
    """(name, folder, episodes) of what to audit: RUN's folder(s), or the episodes played now."""
    from milepost.export import find_runs

    if args.rollouts is not None:
        raise InputError("give RUN, --policy or --rollouts, one of them")
    if args.run is not None:
        if args.policy is not None:
            raise InputError("give RUN or --policy/--env/--data, not both")
        runs = find_runs(args.run)
        chosen = runs if len(runs) == 1 else [runs[0], runs[-1]]
        return [(r.name, r.folder, r.episodes) for r in chosen]
    if args.policy is None or args.env is None or args.data is None:
        raise InputError("give RUN (an eval or training run folder), or --policy, --env and --data to play first")
    from milepost.evaluation.runner import EvalSpec, evaluate

    env_kwargs = {} if args.max_steps is None else {"max_steps": args.max_steps}
    ks = [k for k in (1, args.n) if k <= args.n] if args.n >= 1 else [1]
    spec = EvalSpec(
        env=args.env,
        data=args.data,
        policy=args.policy,
        split=args.split,
        n=args.n,
        ks=sorted(set(ks)),
        levels=args.levels,
        limit=args.limit,
        env_kwargs=env_kwargs,
        seed=args.seed,
    )
    folder = Path(args.out) / "episodes"
    if not args.no_progress:
        print(f"playing the episodes into {folder}", file=sys.stderr)
    evaluate(spec, folder, progress=not args.no_progress)
    run = find_runs(folder)[0]
    return [("", run.folder, run.episodes)]


def run(args: argparse.Namespace) -> int:
    from milepost.evaluation.credit import AuditSettings, audit, write_report

    names = tuple(e.strip() for e in args.estimators.split(",") if e.strip())
    settings = AuditSettings(
        estimators=names, boot=args.boot, confidence=args.confidence, seed=args.seed, critic_epochs=args.critic_epochs
    )
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out}: exists and is not a folder")

    def say(msg: str) -> None:
        if not args.no_progress:
            print(f"credit audit: {msg}", file=sys.stderr)

    written = []
    if args.rollouts is not None:
        from milepost.evaluation.rollouts_import import IMPORTED, read_rollouts, replay

        if args.run is not None or args.policy is not None:
            raise InputError("give RUN, --policy or --rollouts, one of them")
        if args.env is None or args.data is None:
            raise InputError("--rollouts needs --env and --data (the tasks the rollouts played)")
        rollouts = read_rollouts(args.rollouts, args.format)
        episodes, advs = replay(rollouts, args.env, args.data)
        say(f"{len(episodes)} rollouts replayed from {args.rollouts}")
        extra = {IMPORTED: (advs, f"the rollouts' own advantages ({args.format} format, {args.rollouts})")}
        jobs = [("", Path(args.rollouts), episodes, extra)]
    else:
        jobs = [(name, folder, eps, {}) for name, folder, eps in _episodes_of(args)]
    for name, folder, episodes, imported in jobs:
        target = out / name if name else out
        say(f"{len(episodes)} episodes from {folder}")
        result = audit(episodes, settings, where=str(folder), progress=say, imported=imported)
        files = write_report(result, target, title=str(folder))
        written.append(f"{target}/" + ", ".join(files))
        best = ", ".join(f"{n} {result['estimators'][n]['spearman']:.2f}" for n in result["ranking"][:3])
        print(f"{folder}: Spearman with A*, best first: {best}")
    for line in written:
        print(f"written: {line}")
    return 0
