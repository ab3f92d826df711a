"""The outcome sentences of the book's comparisons, written in one place from the numbers.

Every sentence that says what a row of a comparison did goes through this module, so the words mean the same thing
everywhere:

* **"clearly above / below"** is said only of a row whose setting the choice rule (:mod:`zslib.engine.choice`)
  chose on validation classes, and only when the 95% interval of its paired test differences excludes 0;
* a row whose setting the rule did *not* choose (it kept "off") is an **ablation**: its sentence says so, and uses
  plain "above" / "below" for a test interval that excludes 0 (:func:`change_words`);
* a row with seeds stored as diverged, collapsed or unstable (:mod:`zslib.engine.stability`) is called **unstable**
  with the count, never "no clear effect": its interval is wide because seeds broke, not because nothing happened;
* when the rule kept "off", the sentence states the **power** of the choice (:func:`power_difference`): the
  smallest true difference its validation seeds would call clear in 80% of repetitions (:data:`POWER`), and whether
  the leader "cannot be told from off" (its difference is smaller than that);
* a row whose every per-seed difference is exactly 0 is **identical to its baseline**, not "no clear effect", and
  has no power figure (its runs have no spread to state one from);
* a sentence that calls one of many intervals clear says how many the page reads and whether the verdict survives
  Holm's correction over them (:func:`holm`), or that it is uncorrected.

**Power.** With ``n`` paired differences of standard deviation ``sigma`` and a true mean ``delta``, the rule's
interval ``mean +- t_{0.975, n-1} s / sqrt(n)`` lies above 0 when the t statistic exceeds ``t_{0.975, n-1}``; that
statistic follows the noncentral t distribution with ``n - 1`` degrees of freedom and noncentrality
``delta sqrt(n) / sigma``. :func:`power_difference` solves for the ``delta`` at which that happens with probability
0.8, ``sigma`` estimated by the paired spread pooled over every candidate that trained differently from "off"
(:func:`pooled_sd`; for a test row, its own paired differences). It is about 1.3 to 1.4 times the interval's
half-width (:func:`detectable`), which a true difference of its own size crosses only about half the time. The rows
are duck-typed (the attributes of :class:`zslib.analysis.compare.Row`), so this module imports nothing from the
comparison.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import optimize, stats

from zslib.engine.choice import CONFIDENCE
from zslib.engine.config import Config
from zslib.engine.registry import PAPERS
from zslib.engine.stability import UNSTABLE_DROP, broken
from zslib.engine.stats import format_interval, verdict

__all__ = ["detectable", "change_words", "power_words", "row_label", "row_status", "row_sentence",
           "regime_sentences", "adaptation_sentence", "status_note", "headline", "verb_words", "paired_phrase",
           "seeds_words", "CHEAP_RUN_SECONDS", "POWER_AIM", "PAGE_BUDGET_REASON", "POWER", "POWER_METHOD",
           "power_difference", "pooled_sd", "power_of", "power_size", "paired_p", "holm", "correction_words",
           "variant_words", "test_power_words"]

#: A validation run that trains in less than this many seconds is cheap: its choice gets more seeds, up to the entry's
#: cap, so that the rule can detect a difference of about :data:`POWER_AIM`.
CHEAP_RUN_SECONDS = 60.0
#: The difference (a fraction: half a point of Recall@1) the cheap choices' validation seeds aim to detect (at
#: :data:`POWER`).
POWER_AIM = 0.005
#: The probability with which a stated power difference is called clear.
POWER = 0.8
#: How the power difference is computed, in words (what a page says once).
POWER_METHOD = ("the smallest true difference that the rule's 95% interval would exclude 0 for in 80% of repetitions "
                "at these seeds: noncentral t with n - 1 degrees of freedom, the spread of the paired differences "
                "pooled over the candidates that trained differently from off (for a test row, its own)")


def detectable(differences: Sequence[float], confidence: float = CONFIDENCE) -> float:
    """The smallest mean of paired ``differences`` whose ``confidence`` interval would exclude 0, given their
    spread: ``t_{(1+confidence)/2, n-1} * sd / sqrt(n)`` (the interval's half-width). NaN for fewer than two."""
    d = np.asarray([float(x) for x in differences], float)
    if d.size < 2:
        return math.nan
    return float(stats.t.ppf(0.5 + confidence / 2, d.size - 1) * d.std(ddof=1) / math.sqrt(d.size))



def power_difference(sd: float, n: int, power: float = POWER, confidence: float = CONFIDENCE) -> float:
    """The smallest true mean of ``n`` paired differences of standard deviation ``sd`` that the rule's
    ``confidence`` interval lies above 0 for with probability ``power``: ``lambda sd / sqrt(n)``, ``lambda`` solving
    ``P(T > t_{(1+confidence)/2, n-1}) = power`` for ``T`` noncentral t (``n - 1`` degrees of freedom, noncentrality
    ``lambda``). NaN for fewer than two differences or no spread (``sd`` 0: nothing to state a power from)."""
    if n < 2 or not sd > 0 or not math.isfinite(sd):
        return math.nan
    df = n - 1
    crit = stats.t.ppf(0.5 + confidence / 2, df)
    nc = optimize.brentq(lambda lam: stats.nct.sf(crit, df, lam) - power, 0.0, 1e3, xtol=1e-12)
    return float(nc * sd / math.sqrt(n))


def pooled_sd(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """The standard deviation pooled over ``groups`` of paired differences (each of two or more) and its degrees of
    freedom: ``sqrt(sum (n_k - 1) s_k^2 / sum (n_k - 1))``. ``(nan, 0)`` without such a group."""
    groups = [np.asarray([float(x) for x in g], float) for g in groups if len(g) >= 2]
    df = sum(g.size - 1 for g in groups)
    if not df:
        return math.nan, 0
    return float(math.sqrt(sum((g.size - 1) * g.var(ddof=1) for g in groups) / df)), int(df)


def power_of(groups: Sequence[Sequence[float]], power: float = POWER) -> float:
    """:func:`power_difference` at the seeds of ``groups`` (the fewest among them) from their :func:`pooled_sd`,
    leaving out groups whose differences are all 0 (a candidate that did not change training has no spread)."""
    moved = [g for g in groups if any(float(x) != 0 for x in g)]
    if not moved:
        return math.nan
    sd, _ = pooled_sd(moved)
    return power_difference(sd, min(len(g) for g in moved), power)


def power_size(margin: float, scale: float = 100.0) -> str:
    """A power difference in points, with two decimals below a tenth of a point."""
    return f"{margin * scale:.2f}" if margin * scale < 0.1 else f"{margin * scale:.1f}"


def paired_p(differences: Sequence[float]) -> float:
    """The two-sided p-value of the one-sample t test of ``differences`` against 0 (what the 95% interval reads:
    it excludes 0 exactly when this is below 0.05). 1 for differences all 0, 0 for equal non-zero ones; NaN for
    fewer than two."""
    d = np.asarray([float(x) for x in differences], float)
    if d.size < 2:
        return math.nan
    if d.std(ddof=1) == 0:
        return 1.0 if d.mean() == 0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values of ``pvalues`` (a test is clear at familywise 5% when its adjusted value
    is below 0.05): the ``i``-th smallest of ``m`` is multiplied by ``m - i + 1`` (``i`` from 1), made
    non-decreasing in that order and capped at 1. NaN values are left out of the family and stay NaN."""
    p = [float(x) for x in pvalues]
    order = sorted((i for i, x in enumerate(p) if x == x), key=lambda i: p[i])
    m, out, running = len(order), [math.nan] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def correction_words(adjusted: float, tests: int) -> str:
    """What Holm's correction over a page's ``tests`` makes of one clear interval (``adjusted`` its Holm p)."""
    if adjusted != adjusted:
        return f"uncorrected for the page's {tests} tests"
    if adjusted < 1 - CONFIDENCE:
        return f"still clear after Holm's correction over the page's {tests} tests"
    return f"uncorrected: not clear after Holm's correction over the page's {tests} tests"


def variant_words(config, knobs: Sequence[str] | None = None) -> str:
    """The setting a run tested, from its config: ``"lambda1 = 0.2, lambda2 = 0.1"``. ``knobs``: the method
    parameters to name (default: those the method's paper varies in its comparison grid, read from its
    :class:`~zslib.analysis.entry.Entry`'s candidates)."""
    params = dict(getattr(config, "method_params", None) or {})
    if knobs is None:
        knobs = _knobs(getattr(config, "method", ""))
    out = []
    for k in knobs:
        if k not in params:
            continue
        v = params[k]
        out.append(f"{k} {'on' if v else 'off'}" if isinstance(v, bool) else
                   f"{k} = {v:g}" if isinstance(v, (int, float)) else f"{k} = {v}")
    return ", ".join(out)


def _knobs(method: str) -> list[str]:
    """The method parameters that differ between the candidates of ``method``'s comparison grid (in order)."""
    for paper in PAPERS.values():
        entry = paper.comparison
        if paper.method != method or entry is None:
            continue
        base = Config.from_profile("real")
        configs = [entry.build(base, v) for v in entry.candidates.values()]
        configs = [c for c in configs if c.method == method]
        keys = list(dict.fromkeys(k for c in configs for k in c.method_params))
        return [k for k in keys if len({repr(c.method_params.get(k)) for c in configs}) > 1]
    return []


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


def power_words(diff, margin: float, seeds: int, candidate: str = "", scale: float = 100.0, *,
                identical: bool = False) -> str:
    """What a kept "off" means at the rule's power: ``diff`` the leader's paired validation difference from "off"
    (an interval, ``None`` when "off" led), ``margin`` the :func:`power_difference` of the choice's candidates
    (:func:`power_of`; ``candidate`` names what it was pooled over). ``identical``: every candidate's runs equal
    "off"'s on every seed, so there is no spread to state a power from."""
    if identical:
        return ("every candidate's validation runs equal off's on every seed: the weights did not change training, "
                "so no candidate can be told from off and there is no power figure")
    if margin != margin:
        return f"with {seeds} validation seed{'s' if seeds != 1 else ''} the rule has no power to state"
    of = f", the spread pooled over {candidate}" if candidate else ""
    tail = (f"with {seeds} validation seeds the rule would call a true difference of {power_size(margin, scale)} "
            f"points clear in {100 * POWER:.0f}% of repetitions{of}")
    if diff is None:
        return f"no candidate had a higher validation mean than off; {tail}"
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
    if broken(unstable):
        return f"{head} (unstable, {unstable}: not read as an effect)"
    words = change_words(verdict, chosen)
    return f"{head} ({words} it)"


#: Why a page on the quick profile keeps its choices at the default seeds even where a run is cheap.
PAGE_BUDGET_REASON = ("the quick profile trains its runs while the book is built, and every page keeps to a few "
                      "minutes of a laptop CPU")


def seeds_words(seeds: int, default: int, seconds: float, margin: float, scale: float = 100.0, *,
                kept_by: str | None = None) -> str:
    """Why a choice has ``seeds`` validation seeds (``default`` unless it was raised) and what that buys: ``seconds``
    the median training time of its validation runs, ``margin`` its :func:`power_difference`. Runs under
    :data:`CHEAP_RUN_SECONDS` get more seeds, aiming at :data:`POWER_AIM` at 80% power; the sentence says whether the
    aim was met or the seed cap stopped short of it, and for dearer runs that their cost kept the default.
    ``kept_by`` names a budget that kept cheap runs at the default (e.g. a page's time budget when the book is
    built)."""
    cost = (f"a validation run trains in about {seconds:.0f} s" if seconds < 120 else
            f"a validation run trains in about {seconds / 60:.0f} min") if seconds == seconds else "no training time recorded"
    power = ("no power figure (no spread)" if margin != margin else
             f"{100 * POWER:.0f}% power at a true difference of {power_size(margin, scale)} points")
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
    return text if broken(text) else ""


def _corrected(row, metric: str) -> str:
    """``"; <correction words>"`` for a clear interval of ``row``'s ``metric`` when the page's family is known
    (:func:`zslib.analysis.compare.correct` sets ``row.holm`` and ``row.family``), else ``""``."""
    family = getattr(row, "family", 0)
    if not family:
        return ""
    return "; " + correction_words(getattr(row, "holm", {}).get(metric, math.nan), family)


def test_power_words(row) -> str:
    """What a row's test seeds could tell: the :func:`power_difference` of its paired test differences, or why
    there is none."""
    if _identical(row):
        return "no power figure: its runs equal the baseline's"
    margin = getattr(row, "test_power", math.nan)
    if margin != margin:
        return ""
    return (f"its test seeds would call a true difference of {power_size(margin)} points clear in "
            f"{100 * POWER:.0f}% of repetitions")


def row_sentence(row, with_choice: bool = True) -> str:
    """One Markdown sentence for a row of a comparison: its label (the parts and weights that ran) and status,
    what the test runs did against the same-loss baseline in words the rule allows (with Holm's correction over the
    page's tests where it is known), MAP@R where its verdict differs, instability, what a regime that changes
    nothing for the method means, the test seeds' power, and (for an ablation) what "off kept" means at the rule's
    power."""
    head = f"**{row_label(row)}**"
    if getattr(row, "missing", ""):
        return f"{head}: not recorded in this copy ({row.missing})."
    status = row_status(row)
    notes = []
    if status == "ablation":
        why = ""
        if with_choice and hasattr(row, "val_power"):
            why = ": " + power_words(row.val_diff, row.val_power, row.val_seeds, row.val_power_of,
                                     identical=getattr(row, "val_identical", False))
        notes.append(f"an ablation, the rule kept off{why}")
    if getattr(row, "carried_over", ""):
        notes.append(row.carried_over)
    if getattr(row, "unchanged", ""):
        notes.append(row.unchanged)
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
        words = change_words(verdict(d), status == "chosen")
        clear = _corrected(row, "R@1") if verdict(d) in ("up", "down") else ""
        body = f"{words} its baseline, {format_interval(d, signed=True)} points of unseen Recall@1{clear}"
        m = row.vs_baseline.get("MAP@R")
        if m is not None and verdict(m) != verdict(d):
            clear = _corrected(row, "MAP@R") if verdict(m) in ("up", "down") else ""
            body += (f" (MAP@R {change_words(verdict(m), status == 'chosen')} it, {format_interval(m, signed=True)}"
                     f"{clear})")
    power = test_power_words(row) if d is not None else ""
    if power and not _identical(row):
        body += f"; {power}"
    note = f" ({'; '.join(notes)})" if notes else ""
    return f"{head}{note}: {body}."


def regime_sentences(comparison) -> list[str]:
    """The sentences of every row of one regime's comparison."""
    return [row_sentence(r) for r in comparison.rows]


def adaptation_sentence(frozen_row, adapted_row, mean_r1) -> str:
    """What letting the network's last stages train changed for one method (its rows in the two regimes), with
    each row's status and stability in the words of :func:`row_sentence`."""
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


def headline(p, method_name: str, baseline_name: str, status: str, seeds: int, unstable: str = "",
             variant: str = "") -> str:
    """The first sentence of a method chapter's "Key findings" (and of the book's index): ``p`` the paired unseen
    Recall@1 difference (:func:`zslib.engine.stats.paired`) of ``method_name`` against ``baseline_name``, with the
    method's ``status`` under the rule (:func:`zslib.analysis.compare.rule_status`; "clearly" only when
    ``"chosen"``) and, when some seeds broke, ``unstable`` (a :func:`zslib.engine.stability.stability_label`)
    instead of a verdict. ``variant`` (:func:`variant_words`) names the weights tested where ``method_name`` does
    not already."""
    diff = f"{format_interval(p.diff, signed=True)} points over {seeds} seeds paired"
    named = f"{method_name} at {variant}" if variant and variant not in method_name else method_name
    who = f"{named}{status_note(status)}"
    if broken(unstable):
        return (f"On Flowers-102 photographs of unseen classes, {who} is unstable here ({unstable}: their unseen "
                f"Recall@1 ended more than {100 * UNSTABLE_DROP:.0f} points below its best evaluation, or their "
                f"seen Recall@1 collapsed): against {baseline_name} it moved {diff}, a spread made by the broken seeds")
    verb = verb_words(p.verdict, status == "chosen")
    return f"On Flowers-102 photographs of unseen classes, {who} {verb} unseen Recall@1 against {baseline_name}: {diff}"
