"""Findings as text: what a chapter found, generated from the numbers and rendered as a box or a list.

A chapter states its outcomes as prose a reader can read in the page's own font and width, never as long
``print`` lines in a code-output box. :func:`findings_box` makes the "Key findings" box a method chapter
opens with and :func:`found_list` the "What we found" list it closes with (both HTML with a Markdown twin,
so they render in the static book and in Jupyter alike). :func:`real_comparison` writes the sentences every
method chapter needs about its recorded real-profile runs: the untrained floor, the trained baseline head and
the method, with 95% intervals and paired verdicts (:mod:`zslib.engine.stats`).
"""
from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence

from zslib.analysis.verdict import headline, variant_words
from zslib.engine.grid import MissingRunsError, run_grid
from zslib.engine.stability import stability_label
from zslib.engine.stats import format_interval, paired, summarize

__all__ = ["Findings", "findings_box", "found_list", "real_comparison", "verdict_words", "recorded", "not_recorded_box"]


def _inline_html(text: str) -> str:
    """Markdown's ``**bold**`` and ```code``` in escaped text, as HTML."""
    out = html.escape(text, quote=False)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


class Findings:
    """A titled list of sentences shown as an admonition box (``kind``: ``tip``, ``note``, ...) or a plain list."""

    def __init__(self, sentences: Iterable[str], title: str | None = None, kind: str | None = "tip"):
        self.sentences, self.title, self.kind = [s for s in sentences if s], title, kind

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{_inline_html(s)}</li>" for s in self.sentences)
        body = f"<ul>{items}</ul>"
        if self.kind is None:
            return (f"<p><strong>{html.escape(self.title)}</strong></p>" if self.title else "") + body
        title = f'<p class="admonition-title">{html.escape(self.title or "")}</p>'
        return f'<div class="admonition {self.kind}">{title}{body}</div>'

    def _repr_markdown_(self) -> str:
        head = f"**{self.title}**\n\n" if self.title else ""
        return head + "\n".join(f"- {s}" for s in self.sentences)

    def __repr__(self) -> str:
        return self._repr_markdown_()


def findings_box(sentences: Iterable[str], title: str = "Key findings") -> Findings:
    """The box a method chapter opens with: 3 to 5 generated sentences."""
    return Findings(sentences, title, "tip")


def found_list(sentences: Iterable[str], title: str | None = None) -> Findings:
    """The "What we found" list a chapter closes with (no box)."""
    return Findings(sentences, title, None)


def verdict_words(verdict: str) -> str:
    """A paired verdict (``up``, ``down``, ``no clear effect``) as the verb of a sentence."""
    return {"up": "clearly raised", "down": "clearly lowered"}.get(verdict, "did not clearly change")


def real_comparison(floor, baseline: Sequence, method: Sequence, method_name: str,
                    baseline_name: str = "the trained baseline head", status: str = "not chosen") -> list[str]:
    """Sentences about recorded real-profile runs (Flowers-102, frozen ImageNet EfficientNet-Lite0, classes
    52-102 unseen): ``floor`` (one run of the untrained features), ``baseline`` and ``method`` (runs with the
    same seeds). Unseen Recall@1 with 95% intervals over seeds; the differences are paired by seed. ``status`` is
    what the book's choice rule made of the method's setting (:func:`zslib.analysis.verdict.rule_status`): the
    first sentence says "clearly" only for ``"chosen"``, names an ablation as such, and calls a method with
    collapsed or unstable seeds (:mod:`zslib.engine.stability`) unstable instead of giving it a verdict; it names
    the weights the method runs tested (:func:`zslib.analysis.verdict.variant_words`)."""
    raw = 100 * floor.metric("R@1")
    base_vs_floor = 100 * summarize(baseline)[0] - raw
    p = paired(baseline, method)
    first = headline(p, method_name, baseline_name, status, len(method), stability_label(method),
                     variant_words(method[0].config))
    return [
        f"{first} ({method_name} {format_interval(summarize(method))} %, {baseline_name} "
        f"{format_interval(summarize(baseline))} %).",
        f"Training only the embedding head on the frozen pretrained features moved unseen Recall@1 by "
        f"{base_vs_floor:+.1f} points from the untrained features' {raw:.1f} % (measured on this book's 160-px copy "
        "of the photographs).",
    ]


def recorded(grid, seeds=None):
    """The stored runs of ``grid`` (name -> config; recorded or made here), or ``None`` when any is missing."""
    try:
        return run_grid(grid, seeds, stored_only=True)
    except MissingRunsError:
        return None


def not_recorded_box() -> Findings:
    return findings_box(["The real-profile runs this box summarizes are not recorded in this copy of the book; "
                         "the chapter's sections say what each one needs."])
