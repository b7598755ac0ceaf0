"""Several ``experiments.plan_verify`` reports in one table and one plot: which start, which check, which level and
temperature, and how success and step accuracy grow with the samples per turn.

Usage (each RUN is ``LABEL=REPORT.json``, the JSON a ``plan_verify`` report writes beside its Markdown)::

    python -m experiments.plan_verify_compare 'plan check=experiments/results/rushhour_plan_verify.json' \\
        'ACTION check=experiments/results/rushhour_plan_verify_action.json' \\
        --out experiments/results/rushhour_plan_verify_compare.md
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from experiments.plan_verify import level_row
from experiments.report_files import pct


def load(spec: str) -> tuple[str, dict[str, Any]]:
    """``LABEL=REPORT.json`` -> (label, the report's data); a malformed spec, a missing file or one without a
    setting exits with a one-line error."""
    from experiments.report_files import labelled_json

    label, data = labelled_json(spec, "plan_verify_compare")
    if "setting" not in data or not data.get("results"):
        raise SystemExit(f"plan_verify_compare: {spec}: not a plan_verify report (no setting or results)")
    return label, data


def rows(runs: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per (run, k): the setting, avg@n with its interval, pass@n, step accuracy and tokens per turn."""
    out = []
    for label, data in runs:
        st = data["setting"]
        for r in data["results"]:
            lv = level_row(r["metrics"])
            out.append(
                {
                    "run": label,
                    "model": Path(st["model"]).name,
                    "check": st["check"],
                    "level": st["level"],
                    "T": st["temperature"],
                    "k": r["k"],
                    "avg": lv["avg"],
                    "pass": lv["pass_at"][str(st["n"])]["value"],
                    "n": st["n"],
                    "step_accuracy": lv["step_accuracy"],
                    "tokens_per_turn": r["tokens_per_turn"],
                }
            )
    return out


def render(table: list[dict[str, Any]]) -> str:
    head = "| run | start | check | level | T | k | avg@n % [95% CI] | pass@n % | step acc. % | tokens / turn |"
    lines = [head, "|" + "---|" * 10]
    for r in table:
        a = r["avg"]
        lines.append(
            f"| {r['run']} | `{r['model']}` | {r['check']} | {r['level']} | {r['T']} | {r['k']} | "
            f"{pct(a['value'])} [{pct(a['lo'])}, {pct(a['hi'])}] | {pct(r['pass'])} | "
            f"{pct(r['step_accuracy'])} | {r['tokens_per_turn']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def plot(table: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    runs = list(dict.fromkeys(r["run"] for r in table))
    for i, run in enumerate(runs):
        pts = [r for r in table if r["run"] == run]
        ks = [r["k"] for r in pts]
        style = {"marker": "o", "color": f"C{i}", "label": run}
        axes[0].plot(ks, [100 * r["avg"]["value"] for r in pts], **style)
        axes[0].fill_between(
            ks, [100 * r["avg"]["lo"] for r in pts], [100 * r["avg"]["hi"] for r in pts], color=f"C{i}", alpha=0.1
        )
        axes[1].plot(ks, [100 * r["step_accuracy"] for r in pts], **style)
    axes[1].axhline(80, color="grey", ls=":", lw=1, label="step-accuracy target (issue 28)")
    for ax, name in zip(axes, ("success, avg@n (95% CI shaded)", "episode step accuracy"), strict=True):
        ax.set_xscale("log", base=2)
        ks = sorted({r["k"] for r in table})
        ax.set_xticks(ks, [str(k) for k in ks])
        ax.set_xlabel("samples per turn (k)")
        ax.set_ylabel("%")
        ax.set_ylim(0, 100)
        ax.set_title(name, fontsize=10)
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle("Rush Hour: rules-checked best-of-k at play time", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="+", help="LABEL=REPORT.json, a plan_verify report's JSON")
    p.add_argument("--out", type=Path, required=True, help="the report (.md; .json and .png beside it)")
    p.add_argument("--reading", default=None, help="a hand-written reading (Markdown file) kept at the report's end")
    args = p.parse_args()
    from experiments.report_files import write_report

    table = rows([load(spec) for spec in args.runs])
    write_report(
        args.out,
        title="Rush Hour: rules-checked best-of-k at play time, every setting",
        module="experiments.plan_verify_compare",
        intro="Each row one `experiments.plan_verify` evaluation (its report named in the command); k = 1 is the "
        "plain agent. Inference with a rules checker, not the start.\n\n",
        body=render(table),
        data={"rows": table},
        plot=lambda path: plot(table, path),
        reading=args.reading,
    )


if __name__ == "__main__":
    main()
