"""The outcome sentences of the book's comparisons, written in one place from the numbers.

Every sentence that says what a row of a comparison did goes through this module, so the words mean the same thing
everywhere:

* **"clearly above / below"** is said only of a row whose setting the choice rule (:mod:`zslib.engine.choice`)
  chose on validation classes, and only when the 95% interval of its paired test differences excludes 0;
* a row whose setting the rule did *not* choose (it kept "off") is an **ablation**: its sentence says so, and uses
  plain "above" / "below" for a test interval that excludes 0 (:func:`change_words`);
* a row with seeds stored as diverged, collapsed or unstable (:mod:`zslib.engine.stability`) is called **unstable**
  with the count, never "no clear effect": its interval is wide because seeds broke, not because nothing happened;
* when the rule kept "off", the sentence states the **power** of the choice: the smallest paired difference its
  validation seeds could have called clear (:func:`detectable`), and whether the leader "cannot be told from off
  at this power" (its difference is inside that margin);
* a row whose every per-seed difference is exactly 0 is **identical to its baseline**, not "no clear effect".

:func:`detectable` is the half-width of the Student-t interval of paired differences: with ``n`` seeds and the
differences' standard deviation ``s``, ``t_{0.975, n-1} s / sqrt(n)``. A true difference of that size is called
clear about half the time; a smaller one is called clear less often. The rows are duck-typed (the attributes of
:class:`zslib.analysis.compare.Row`), so this module imports nothing from the comparison.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from zslib.engine.choice import CONFIDENCE
from zslib.engine.stats import format_interval

__all__ = ["detectable", "change_words", "power_words", "row_label", "row_status", "row_sentence",
           "regime_sentences", "adaptation_sentence", "status_note", "headline", "verb_words", "paired_phrase",
           "seeds_words", "CHEAP_RUN_SECONDS", "POWER_AIM", "PAGE_BUDGET_REASON"]

#: A validation run that trains in less than this many seconds is cheap: its choice gets more seeds, up to the entry's
#: cap, so that the rule can detect a difference of about :data:`POWER_AIM`.
CHEAP_RUN_SECONDS = 60.0
#: The difference (a fraction: half a point of Recall@1) the cheap choices' validation seeds aim to detect.
POWER_AIM = 0.005


def detectable(differences: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """The smallest mean of paired ``differences`` whose ``confidence`` interval would exclude 0, given their
    spread: ``t_{(1+confidence)/2, n-1} * sd / sqrt(n)`` (the interval's half-width). NaN for fewer than two."""
    from scipy import stats

    d = np.asarray([float(x) for x in differences], float)
    if d.size < 2:
        return math.nan
    return float(stats.t.ppf(0.5 + confidence / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))



def change_words(verdict: str, chosen: bool) -> str:
    """How a paired test verdict reads: ``"clearly above"`` only for a chosen setting; an ablation's interval that
    excludes 0 is just ``"above"``; an interval that contains 0 is ``"not clearly different from"`` either way."""
    if verdict == "up":
        return "clearly above" if chosen else "above"
    if verdict == "down":
        return "clearly below" if chosen else "below"
    return "not clearly different from"


def verb_words(verdict: str, chosen: bool) -> str:
    """A paired verdict as the verb of a sentence: ``"clearly raised"`` / ``"clearly lowered"`` only for a chosen
    setting, ``"raised"`` / ``"lowered"`` for an ablation, ``"did not clearly change"`` when the interval holds 0."""
    words = {"up": "raised", "down": "lowered"}.get(verdict)
    if words is None:
        return "did not clearly change"
    return f"clearly {words}" if chosen else words


def power_words(diff, margin: float, seeds: int, candidate: str = "", scale: float = 100.0) -> str:
    """What a kept "off" means at the rule's power: ``diff`` the leader's paired validation difference from "off"
    (an interval, ``None`` when "off" led), ``margin`` :func:`detectable` of the paired differences of
    ``candidate`` (the leader, or when "off" led the best candidate that trained differently from it)."""
    if margin != margin:
        return f"with {seeds} validation seed{'s' if seeds != 1 else ''} the rule has no power to choose"
    size = f"{margin * scale:.2f}" if margin * scale < 0.1 else f"{margin * scale:.1f}"
    tail = f"with {seeds} validation seeds the rule could detect differences of about {size} points"
    if diff is None:
        of = f" ({candidate}, the best candidate that trained differently from off)" if candidate else ""
        return f"no candidate had a higher validation mean than off; {tail}{of}"
    if abs(diff.mean) < margin:
        return (f"the leader's {diff.mean * scale:+.2f} points on validation cannot be told from off at this power "
                f"({tail})")
    return f"the leader's {diff.mean * scale:+.2f} points on validation were not clearly above off ({tail})"


def paired_phrase(diff, verdict: str, chosen: bool, against: str, unstable: str = "") -> str:
    """A paired difference (a ``(mean, low, high)`` triple of fractions) against ``against`` in this module's
    words: ``"+2.1 [+0.3, +3.9] points against the untrained network (clearly above it)"``, "clearly" only when
    ``chosen``; with ``unstable`` (a :func:`zslib.engine.stability.stability_label` other than ``"stable"``) the
    label replaces the verdict, since the interval then measures broken seeds."""
    head = f"{format_interval(diff, signed=True)} points against {against}"
    if unstable and unstable != "stable":
        return f"{head} (unstable, {unstable}: not read as an effect)"
    words = change_words(verdict, chosen)
    return f"{head} ({words} it)"


#: Why a page on the quick profile keeps its choices at the default seeds even where a run is cheap.
PAGE_BUDGET_REASON = ("the quick profile trains its runs while the book is built, and every page keeps to a few "
                      "minutes of a laptop CPU")


def seeds_words(seeds: int, default: int, seconds: float, margin: float, scale: float = 100.0, *,
                kept_by: str | None = None) -> str:
    """Why a choice has ``seeds`` validation seeds (``default`` unless it was raised) and what that buys: ``seconds``
    the median training time of its validation runs, ``margin`` its :func:`detectable` difference. Runs under
    :data:`CHEAP_RUN_SECONDS` get more seeds, aiming at :data:`POWER_AIM`; the sentence says whether the aim was met or
    the seed cap stopped short of it, and for dearer runs that their cost kept the default. ``kept_by`` names a budget
    that kept cheap runs at the default (e.g. a page's time budget when the book is built)."""
    cost = (f"a validation run trains in about {seconds:.0f} s" if seconds < 120 else
            f"a validation run trains in about {seconds / 60:.0f} min") if seconds == seconds else "no training time recorded"
    size = f"{margin * scale:.2f}" if margin * scale < 0.1 else f"{margin * scale:.1f}"
    power = "no measurable power" if margin != margin else f"it detects differences of about {size} points"
    if seeds > default:
        aim = (f"the aim of {POWER_AIM * scale:.1f} points is met" if margin == margin and margin <= POWER_AIM else
               f"short of the {POWER_AIM * scale:.1f}-point aim: the seeds stop at the cap of {seeds}")
        return f"{seeds} validation seeds, raised from {default} because {cost}; {power} ({aim})"
    if seconds == seconds and seconds < CHEAP_RUN_SECONDS:
        if kept_by:
            return f"{seeds} validation seeds although {cost}: {kept_by}; {power}"
        return f"{seeds} validation seeds although {cost}; {power}"
    return f"{seeds} validation seeds ({cost}, so no more were trained); {power}"


def row_label(row) -> str:
    """The method and the parts that ran: ``"Adapt-Adv (GDFL attention, adversary off)"``."""
    parts = getattr(row, "label", "") or getattr(row, "tested", "")
    return f"{row.method} ({parts})" if parts else row.method


def row_status(row) -> str:
    """``"chosen"`` (the rule chose this setting), ``"ablation"`` (the rule kept off; the leader was tested) or
    ``""`` (no choice recorded)."""
    if getattr(row, "choice", None) is None:
        return ""
    return "ablation" if row.ablation else "chosen"


def _identical(row) -> bool:
    d = row.vs_baseline.get("R@1")
    return bool(getattr(row, "identical", False)) or (d is not None and d.n > 1 and d.low == d.high == d.mean == 0)


def _instability(row) -> str:
    text = getattr(row, "stability", "") or ""
    return "" if text in ("", "stable") else text


def row_sentence(row, with_choice: bool = True) -> str:
    """One Markdown sentence for a row of a comparison: its label and status, what the test runs did against the
    same-loss baseline in words the rule allows, MAP@R where its verdict differs, instability, and (for an
    ablation) what "off kept" means at the rule's power."""
    from zslib.engine.stats import verdict

    head = f"**{row_label(row)}**"
    if getattr(row, "missing", ""):
        return f"{head}: not recorded in this copy ({row.missing})."
    status = row_status(row)
    notes = []
    if status == "ablation":
        why = ""
        if with_choice and getattr(row, "val_detectable", None) is not None:
            why = ": " + power_words(row.val_diff, row.val_detectable, row.val_seeds, row.val_margin_of)
        notes.append(f"an ablation, the rule kept off{why}")
    if getattr(row, "carried_over", ""):
        notes.append(row.carried_over)
    d = row.vs_baseline.get("R@1")
    unstable = _instability(row)
    if d is None:
        body = "no test runs"
    elif _identical(row):
        body = "identical to its baseline on every seed (the weight did not change training)"
    elif unstable:
        body = (f"unstable ({unstable}), so its interval against the baseline ({format_interval(d, signed=True)} "
                "points of unseen Recall@1) measures broken seeds, not an effect")
    else:
        body = (f"{change_words(verdict(d), status == 'chosen')} its baseline, {format_interval(d, signed=True)} "
                "points of unseen Recall@1")
        m = row.vs_baseline.get("MAP@R")
        if m is not None and verdict(m) != verdict(d):
            body += f" (MAP@R {change_words(verdict(m), status == 'chosen')} it, {format_interval(m, signed=True)})"
    margin = getattr(row, "test_detectable", math.nan)
    if d is not None and not _identical(row) and margin == margin:
        body += f"; its test seeds detect about {100 * margin:.1f} points"
    note = f" ({'; '.join(notes)})" if notes else ""
    return f"{head}{note}: {body}."


def regime_sentences(comparison) -> list[str]:
    """The sentences of every row of one regime's comparison."""
    return [row_sentence(r) for r in comparison.rows]


def adaptation_sentence(frozen_row, adapted_row, mean_r1) -> str:
    """What letting the network's last stages train changed for one method (its rows in the two regimes), with
    each row's status and stability in the words of :func:`row_sentence`."""
    from zslib.engine.stats import verdict

    parts = []
    base_f, base_a = frozen_row.baseline, adapted_row.baseline
    if base_f and base_a and not hasattr(base_f[0], "prefix"):
        parts.append(f"its baseline goes from {100 * mean_r1(base_f):.1f}% (frozen) to {100 * mean_r1(base_a):.1f}% "
                     "(adapted)")
    lf, la = frozen_row.label or frozen_row.tested, adapted_row.label or adapted_row.tested
    which = f"{lf}, in both" if lf == la else f"{lf} frozen, {la} adapted"
    parts.append(f"the method ({which}) from {100 * mean_r1(frozen_row.runs):.1f}% to "
                 f"{100 * mean_r1(adapted_row.runs):.1f}%")
    said = []
    for name, row in (("frozen", frozen_row), ("adapted", adapted_row)):
        d = row.vs_baseline.get("R@1")
        if d is None:
            continue
        status = row_status(row)
        tag = ", an ablation" if status == "ablation" else ""
        if _identical(row):
            said.append(f"identical when {name} (on every seed{tag})")
        elif _instability(row):
            said.append(f"unstable when {name} ({_instability(row)}; {format_interval(d, signed=True)}{tag})")
        else:
            words = change_words(verdict(d), status == "chosen").removesuffix(" from")
            said.append(f"{words} when {name} ({format_interval(d, signed=True)}{tag})")
    if said:
        parts.append("against its baseline: " + " and ".join(said))
    carried = getattr(adapted_row, "carried_over", "")
    return f"**{adapted_row.method}**: " + "; ".join(parts) + (f" (adapted: {carried})" if carried else "") + "."


def status_note(status: str) -> str:
    """The words a sentence adds after a method's name for ``status``
    (:func:`zslib.analysis.compare.rule_status`)."""
    return {"chosen": "", "ablation": " (an ablation: the book's validation rule keeps the method off)",
            "not chosen": " (a setting the book's validation rule did not choose)"}.get(status, "")


def headline(p, method_name: str, baseline_name: str, status: str, seeds: int, unstable: str = "") -> str:
    """The first sentence of a method chapter's "Key findings" (and of the book's index): ``p`` the paired unseen
    Recall@1 difference (:func:`zslib.engine.stats.paired`) of ``method_name`` against ``baseline_name``, with the
    method's ``status`` under the rule (:func:`zslib.analysis.compare.rule_status`; "clearly" only when
    ``"chosen"``) and, when some seeds broke, ``unstable`` (a :func:`zslib.engine.stability.stability_label`)
    instead of a verdict."""
    diff = f"{format_interval(p.diff, signed=True)} points over {seeds} seeds paired"
    who = f"{method_name}{status_note(status)}"
    if unstable and unstable != "stable":
        from zslib.engine.stability import UNSTABLE_DROP

        return (f"On Flowers-102 photographs of unseen classes, {who} is unstable here ({unstable}: their unseen "
                f"Recall@1 ended more than {100 * UNSTABLE_DROP:.0f} points below its best evaluation, or their "
                f"seen Recall@1 collapsed): against {baseline_name} it moved {diff}, a spread made by the broken seeds")
    verb = verb_words(p.verdict, status == "chosen")
    return f"On Flowers-102 photographs of unseen classes, {who} {verb} unseen Recall@1 against {baseline_name}: {diff}"
