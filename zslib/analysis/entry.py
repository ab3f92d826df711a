"""What a paper declares for the one-protocol comparison (:mod:`zslib.analysis.compare`): its :class:`Entry`.

Each paper's ``recipes.py`` builds its entry from its own configs (``COMPARISON``) and its
:class:`~zslib.engine.paper.Paper` record carries it; the comparison iterates
:data:`~zslib.engine.registry.PAPERS` and never names a paper. A :class:`Claim` points at the paper's own reported
gain for the variant a candidate trains.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from zslib.engine.choice import VALIDATION_SEEDS
from zslib.engine.config import Config
from zslib.reported import reported_value

__all__ = ["Claim", "Entry", "FINE_TUNED"]


#: How the papers train: every layer of the network, from ImageNet weights (the book's fine-tuned regime).
FINE_TUNED = "the whole network fine-tuned"


@dataclass(frozen=True)
class Claim:
    """A paper's reported gain of the variant nearest to the one the book tests: ``method`` and ``base`` are
    ``(table, row, column)`` cells of :mod:`zslib.reported` for ``paper`` (the two may come from different tables of
    it). ``setting``: the method parameters the paper's row ran with (its weights, the parts on or off);
    ``unstated``: parameters the book varies that the paper does not give for the row; ``trained``: what of the
    network the paper trained. :meth:`differences` says what separates the paper's row from a tested run: none, and
    it is the *same variant*; otherwise the *nearest* one."""

    paper: str
    method: tuple
    base: tuple
    dataset: str
    setting: Mapping = field(default_factory=dict, hash=False)
    unstated: tuple = ()
    trained: str = FINE_TUNED

    def gain(self) -> float:
        (tm, rm, cm), (tb, rb, cb) = self.method, self.base
        return float(reported_value(tm, rm, cm, self.paper)) - float(reported_value(tb, rb, cb, self.paper))

    def where(self) -> str:
        (tm, rm, _), (tb, rb, _) = self.method, self.base
        tables = f"Table {tm}" if tm == tb else f"Tables {tb} and {tm}"
        return f"{rm} vs {rb}, {tables}, {self.dataset}, {self.paper}"

    def differences(self, config, trained: str) -> tuple[str, ...]:
        """What separates the paper's row from a run of ``config`` whose network was trained as ``trained``
        (e.g. :data:`FINE_TUNED`, or "a head on the frozen network"): the dataset, each parameter of
        :attr:`setting` the run sets otherwise, each :attr:`unstated` one, and how the network trained. Empty: the
        same variant."""
        out = []
        if _key(self.dataset) != _key(config.dataset):
            out.append(f"dataset {self.dataset} (here {config.dataset})")
        params = dict(config.method_params or {})
        for k, v in self.setting.items():
            if k not in params or params[k] != v:
                out.append(f"{k} {_shown(v)} (here {_shown(params.get(k, 'unset'))})")
        out += [f"{k} not stated for the row (here {_shown(params.get(k, 'unset'))})" for k in self.unstated]
        if trained != self.trained:
            out.append(f"{self.trained} (here {trained})")
        return tuple(out)


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def _shown(value) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _no_claim(label: str) -> str:
    return "no like-for-like row"


@dataclass(frozen=True)
class Entry:
    """One method of the comparison: how to make its configs, its candidates, and the paper's own claim.

    ``build(base, value)`` makes the config of candidate ``value`` (``None``: "off"); ``candidates`` maps a label
    to a value; ``claims(label)`` is the paper's gain for the variant that candidate trains (a :class:`Claim`), or a
    sentence saying why the paper has no like-for-like row; ``parts(label)`` names the parts of the method that
    candidate runs ("GDFL attention, adversary off"); ``off_metrics_prefix`` reads "off" from a prefix of the same
    runs' metrics (ZSML's ``input``). ``quick`` and ``adapted`` name the candidates trained in those regimes (empty:
    all of them). ``name`` and ``paper`` (how the book writes the method, the paper's bibkey) are filled in from
    the paper's record by :func:`zslib.analysis.compare.entries`."""

    loss: str
    knob: str
    build: Callable[..., Config]
    candidates: Mapping[str, object]
    claims: Callable[[str], Claim | str] = _no_claim
    parts: Callable[[str], str] = str
    off_metrics_prefix: str | None = None
    quick: tuple = ()
    adapted: tuple = ()
    val_seeds: Mapping[str, int] = field(default_factory=dict)  # regime -> seeds of the choice (default 3)
    name: str = ""
    paper: str = ""

    def choice_seeds(self, regime: str) -> tuple[int, ...]:
        """The seeds ``regime``'s choice for this method is made with: :data:`~zslib.engine.choice.VALIDATION_SEEDS`,
        or more where its runs are cheap enough to give the rule the power to choose (``val_seeds``)."""
        return tuple(range(self.val_seeds.get(regime, len(VALIDATION_SEEDS))))

    def candidates_for(self, regime: str) -> dict:
        """The candidates trained in ``regime``: all of them in the real frozen regime; on the quick profile only
        those named in ``quick`` (the paper's own setting), so that the chapter's quick grid fits its time budget;
        in the adapted regime, where a run costs several times more, only those named in ``adapted``: the candidate
        that led the frozen regime's *validation* grid at its first three seeds (and for Adapt-Adv also its best
        setting with the adversary on, since the paper's method is attention plus adversary; for JRD, whose small
        weights tied with "off" there, also the quick profile's alpha 1). When the adapted runs were trained
        relative to each other is read from their records (:func:`zslib.analysis.compare.history_sentences`),
        not stated here."""
        keep = {"quick": self.quick, "real adapted": self.adapted}.get(regime, ())
        if keep:
            return {k: v for k, v in self.candidates.items() if k in keep}
        return dict(self.candidates)
