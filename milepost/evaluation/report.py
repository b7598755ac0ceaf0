"""Reports: ``metrics.json``, a Markdown table laid out like the paper's Table 7 (levels as columns), and the
failure taxonomy per level."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from milepost.evaluation.failures import FAILURE_KINDS
from milepost.evaluation.metrics import Estimate, LevelMetrics
from milepost.tables import md_row, md_rule, md_text


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}"


def _est(e: Estimate | None) -> str:
    return "-" if e is None else f"{100 * e.value:.1f} [{100 * e.lo:.0f}, {100 * e.hi:.0f}]"


def markdown_table(title: str, levels: Sequence[LevelMetrics], ks: Sequence[int], *, ranges: dict[str, str]) -> str:
    """Levels as columns, metrics as rows; percentages with 95% CIs (bootstrap over tasks)."""
    head = ["metric"] + [f"{lv.level} ({ranges.get(lv.level, '')})" for lv in levels]
    rows: list[list[str]] = [
        ["tasks x samples"] + [f"{lv.tasks} x {lv.samples}" for lv in levels],
        ["mean goal distance"] + [f"{lv.mean_goal_distance:.1f}" for lv in levels],
    ]
    for k in ks:
        rows.append([f"pass@{k} (%)"] + [_est(lv.pass_at.get(str(k))) for lv in levels])
    n = max((lv.samples for lv in levels), default=0)
    rows.append([f"avg@{n} (%)"] + [_est(lv.avg) for lv in levels])
    rows.append(["step accuracy (%)"] + [_pct(lv.step_accuracy) for lv in levels])
    rows.append(["subgoals reached (%)"] + [_pct(lv.subgoal_fraction) for lv in levels])
    rows.append(["oracle ceiling (%)"] + [_pct(lv.oracle_ceiling) for lv in levels])
    if any(lv.infra_failures for lv in levels):
        rows.append(["infrastructure failures (left out)"] + [str(lv.infra_failures) for lv in levels])
    rows.append(
        ["turns on successes"]
        + [
            "-" if lv.effective_horizon is None else f"{lv.effective_horizon:.1f} (d={lv.goal_distance_on_success:.1f})"
            for lv in levels
        ]
    )
    lines = [f"### {md_text(title)}", "", md_row(head), md_rule(len(head))]
    lines += [md_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def failure_table(levels: Sequence[LevelMetrics]) -> str:
    """Share of episodes per failure kind (first match wins), per level."""
    head = ["failure"] + [lv.level for lv in levels]
    lines = [md_row(head), md_rule(len(head))]
    totals = [sum(lv.terminations.values()) or 1 for lv in levels]
    for kind in FAILURE_KINDS:
        counts = [lv.failures.get(kind, 0) for lv in levels]
        if any(counts):
            lines.append(md_row([kind] + [f"{100 * c / t:.1f}%" for c, t in zip(counts, totals)]))
    if len(lines) == 2:
        lines.append("| (no failures) |" + " |" * len(levels))
    return "\n".join(lines) + "\n"


# Rows of the SGO table: (label, counter), shown per level as totals; shares are computed below the table.
SGO_ROWS = (
    ("episodes", "episodes"),
    ("plans from the programmatic planner", "plan_programmatic"),
    ("plans from the LLM planner", "plan_llm"),
    ("LLM plans rejected (fallback used)", "plan_fallback"),
    ("replans", "replans"),
    ("skips", "skips"),
    ("claims checked", "claims"),
    ("claims accepted", "claims_accepted"),
    ("claims rejected (hallucinated progress)", "claims_rejected"),
    ("claims unverifiable", "claims_unverifiable"),
    ("judge calls", "judge_calls"),
    ("judge disagreements with a predicate", "judge_disagreements"),
    ("turns with a PROGRESS line", "progress_lines"),
    ("progress checks (judge every N turns)", "progress_checks"),
    ("judged off track (replans from it)", "progress_off"),
    ("judge agrees with the environment's progress", "progress_agreement"),
    ("turns", "turns"),
    ("plan items done / planned", "items"),
)


def sgo_table(stats: dict[str, dict[str, int]], levels: Sequence[str]) -> str:
    """SGO statistics per level and overall (totals over episodes)."""
    columns = [lv for lv in levels if lv in stats] + ["all"]
    lines = [md_row(["SGO", *columns]), md_rule(len(columns) + 1)]
    for label, key in SGO_ROWS:
        if key == "items":
            cells = [f"{stats[c].get('items_done', 0)} / {stats[c].get('items', 0)}" for c in columns]
        elif key in ("progress_checks", "progress_off", "progress_agreement"):
            if not any(stats[c].get("progress_checks", 0) for c in columns):
                continue  # no progress judge in this run
            cells = [_progress_cell(key, stats[c]) for c in columns]
        else:
            cells = [str(stats[c].get(key, 0)) for c in columns]
        lines.append(md_row([label, *cells]))
    return "\n".join(lines) + "\n"


def _progress_cell(key: str, s: dict[str, int]) -> str:
    if key == "progress_checks":
        return str(s.get("progress_checks", 0))
    if key == "progress_off":
        return f"{s.get('progress_off_track', 0)} ({s.get('progress_replans', 0)})"
    # agreement over the checks where both the judge answered and the environment's progress is known
    known = s.get("progress_known", 0)
    agree = s.get("progress_agree", 0)
    return f"{agree} / {known} ({100 * agree / known:.0f}%)" if known else "-"


def infra_paragraph(infra: dict[str, Any], levels: Sequence[LevelMetrics]) -> list[str]:
    """Lines saying how many episodes the backend failed and that every metric leaves them out (none: [])."""
    count = int(infra.get("episodes", 0))
    if not count:
        return []
    per_level = ", ".join(f"{name} {n}" for name, n in infra.get("by_level", {}).items())
    text = (
        f"**Infrastructure failures: {count} episode(s)** ({per_level}) ended because the backend gave up "
        "(server errors or timeouts after every retry). They say nothing about the policy and are left out of "
        "pass@k, avg@k and every other metric; pass@k uses the samples that remain per task."
    )
    left_out = int(infra.get("tasks_left_out", 0))
    if left_out:
        text += f" {left_out} task(s) have no valid sample and are left out."
    short = {k: sum(lv.pass_left_out.get(k, 0) for lv in levels) for lv in levels for k in lv.pass_left_out}
    if short:
        text += (
            " Tasks left out of pass@k for lack of k valid samples: "
            + ", ".join(f"pass@{k} {n}" for k, n in sorted(short.items(), key=lambda kv: int(kv[0])))
            + "."
        )
    errors = infra.get("errors") or []
    if errors:
        text += f" First error: `{errors[0]}`."
    text += " Rerun them with the same command and `--retry-failed`."
    return [text, ""]


def best_of_sentence(summary: dict[str, Any] | None) -> str:
    """Best-of-k's cost and choices in one sentence (" Per turn: ..."), empty without counts."""
    if not summary:
        return ""
    text = (
        f" Per turn: {summary['tokens_per_turn']:.1f} tokens generated over the {summary['k']} samples, "
        f"{100 * summary['accepted_sample_share']:.1f}% of samples acceptable, an acceptable answer kept in "
        f"{100 * summary['kept_accepted_share']:.1f}% of turns"
    )
    if "revisits_avoided_share" in summary:
        text += (
            f"; the loop check changed the answer in {100 * summary['revisits_avoided_share']:.1f}% of turns and "
            f"found every acceptable answer leading back in {100 * summary['revisits_kept_share']:.1f}%"
        )
    return text + f" ({summary['turns']} turns of {summary['episodes']} episodes)."


def render_report(
    meta: dict[str, Any],
    levels: Sequence[LevelMetrics],
    ks: Sequence[int],
    ranges: dict[str, str],
    plot_name: str | None,
    sgo: dict[str, dict[str, int]] | None = None,
    note: str = "",
    best_of: dict[str, Any] | None = None,
) -> str:
    """The whole Markdown report of one evaluation run (with the SGO statistics when ``sgo`` is given).

    ``meta["temperature"]`` is shown when present (scripted policies have none); ``meta["infra_failures"]``
    (see ``runner.infra_summary``) adds a paragraph on the episodes left out; ``note`` ends the header;
    ``best_of`` (``runner.best_of_summary``) what best-of-k generated and kept.
    """
    policy = meta.get("policy", "?")
    label = " (scripted baseline)" if meta.get("scripted") else ""
    temperature = f"temperature {meta['temperature']}; " if meta.get("temperature") is not None else ""
    parts = [
        f"# Evaluation: {meta.get('env')} / {md_text(policy)}{label}",
        "",
        f"Data: `{meta.get('data')}` split `{meta.get('split')}`; agent `{meta.get('agent')}`; "
        f"action mode `{meta.get('env_kwargs', {}).get('action_mode', 'atomic')}`; budget H_max = "
        f"{meta.get('max_steps')}; {temperature}seed {meta.get('seed')}.",
        "Intervals are 95% percentile bootstrap intervals over tasks. The oracle ceiling is the share of tasks "
        "whose optimal number of turns fits the budget.",
        *(
            [
                "Short-horizon proxy (`--single-turn`): "
                + (
                    "the whole board in one answer, checked cell by cell (step accuracy = empty cells filled "
                    "correctly)."
                    if meta.get("env") == "sudoku"
                    else "slide moves, one per answer (compressed horizon)."
                )
            ]
            if meta.get("single_turn")
            else []
        ),
        *(
            [
                f"Best of {meta['best_of']} (`--best-of`): each turn {meta['best_of']} answers were sampled and the "
                "first the environment would accept was played"
                + (
                    ", preferring one that leads to a state the episode had not been in (`--avoid-revisits`)"
                    if meta.get("avoid_revisits")
                    else ""
                )
                + ": inference with the game's rules in the loop, not the model alone."
                + best_of_sentence(best_of)
            ]
            if meta.get("best_of", 1) > 1
            else []
        ),
        "",
        *infra_paragraph(meta.get("infra_failures") or {}, levels),
        *([note, ""] if note else []),
        markdown_table(f"Success by goal distance ({policy})", levels, ks, ranges=ranges),
        "### Failure taxonomy (share of episodes)",
        "",
        failure_table(levels),
    ]
    if sgo:
        parts += [
            f"### SGO agent (planner `{meta.get('planner')}`, judge `{meta.get('judge')}`)",
            "",
            sgo_table(sgo, [lv.level for lv in levels]),
        ]
    if plot_name:
        parts += [f"![success against goal distance]({plot_name})", ""]
    return "\n".join(parts)
