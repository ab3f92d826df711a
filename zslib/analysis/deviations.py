"""Where a chapter's runs depart from its paper's recipe: one table per paper, made from the code.

Every method chapter trains its method on the ``real`` profile (Flowers-102 photographs and a frozen ImageNet
network on a CPU), not in the paper's setting. :func:`deviation_table` states, for one paper, every remaining
difference in one Markdown table, a row per :class:`Deviation`:

* **what** differs;
* **the paper**: what the paper does, with its section, equation or table;
* **the book by default**: what the chapter's runs do;
* **the paper's form by a switch**: the :class:`Switch` (Config fields, loss parameters or method parameters and
  their values) that gives the paper's form, or why there is none;
* **why the default stays**.

The book-default cell is *read*, never typed: it is filled in when the table is drawn from the config the chapter
trains (built by the paper's own functions, hence from :data:`zslib.engine.profile.PROFILES`, the ``Config``
field defaults and the declared :class:`~zslib.engine.method.Param` defaults of the method). For a row with a
switch the cell opens with the current values of the switch's settings; if a default ever becomes the paper's
value, the row says so instead of repeating a stale sentence. Prose in ``book_form`` may quote the code through
``str.format`` fields (:func:`namespace` lists them), e.g. ``"{real.iterations} steps"``.

The rows every paper shares (the backbone and its training, the data, the augmentation, the training length and
batch) are made here by :func:`common_rows`, once; each paper's ``zslib/methods/<paper>/deviations.py`` gives
its side of them and adds its own rows in a tuple ``DEVIATIONS``. A chapter shows its table in one line::

    display(Markdown(deviation_table("cml")))
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zslib.engine.config import Config
from zslib.engine.data.datasets import get_dataset_class
from zslib.engine.losses import LOSSES
from zslib.engine.profile import ADAPTED_REAL, PROFILES
from zslib.engine.registry import PAPERS, get_method

__all__ = ["Deviation", "Switch", "COMMON", "common_rows", "for_config", "recipe_row", "deviations",
           "deviation_table", "markdown_table", "namespace", "read_setting", "real_config"]

#: The keys of the rows every paper's table holds (:func:`common_rows`).
COMMON = ("network", "data", "augmentation", "budget")

#: Settings whose value ``None`` stands for a value computed from others: shown with it.
_IMPLIED = {"objective_lr": ("new_layer_mult × lr", lambda c: c.new_layer_mult * c.lr)}


def real_config():
    """The real profile's config with its defaults (:meth:`zslib.engine.config.Config.from_profile`)."""
    return Config.from_profile("real")


def recipe_row(recipes, name: str) -> Callable:
    """A builder of the config that a paper's recipes name ``name`` (``recipes.real_configs()[name]``, the
    real-profile rows its chapter records), looked up each time it is called, so that a table follows the
    chapter."""
    def build():
        rows = recipes.real_configs()
        if name not in rows:
            raise KeyError(f"{recipes.__name__}.real_configs() has no row {name!r}; its rows are {list(rows)}")
        return rows[name]

    build.__doc__ = f"``{recipes.__name__}.real_configs()[{name!r}]``: the config the chapter trains."
    return build


def for_config(config: Callable, *rows: "Deviation") -> tuple["Deviation", ...]:
    """``rows`` describing the config that ``config`` builds (a paper's own rows, after :func:`common_rows`)."""
    return tuple(dataclasses.replace(row, config=config) for row in rows)


# ----------------------------------------------------------------------------------------------------
# Reading and setting a config


def _kind(key: str) -> tuple[str, str]:
    """``("method", name)``, ``("loss", name)`` or ``("config", field)`` for a setting's key."""
    for prefix, kind in (("method_params.", "method"), ("loss_params.", "loss")):
        if key.startswith(prefix):
            return kind, key[len(prefix):]
    return "config", key


def read_setting(config, key: str):
    """The value ``config`` trains with for ``key``: a Config field (``"objective_lr"``), a loss parameter
    (``"loss_params.margin"``, the loss's default when the config leaves it out) or a method parameter
    (``"method_params.adversary_input"``, the method's declared default when the config leaves it out)."""
    kind, name = _kind(key)
    if kind == "method":
        settings = get_method(config.method).settings(config.method_params)
        if name not in settings:
            raise KeyError(f"method {config.method!r} has no parameter {name!r}")
        return settings[name]
    if kind == "loss":
        values = {**LOSSES[config.loss].defaults, **config.loss_params}
        if name not in values:
            raise KeyError(f"loss {config.loss!r} has no parameter {name!r}")
        return values[name]
    if not any(f.name == name for f in dataclasses.fields(config)):
        raise KeyError(f"Config has no field {name!r}")
    return getattr(config, name)


def _same(a, b) -> bool:
    return json.loads(json.dumps(a, default=str)) == json.loads(json.dumps(b, default=str))


def _show(value) -> str:
    if isinstance(value, float):
        return format(value, "g")
    return repr(value)


@dataclass(frozen=True)
class Switch:
    """The settings that give a row the paper's form: ``settings`` maps a key (a Config field, ``"loss_params.<name>"``
    or ``"method_params.<name>"``, see :func:`read_setting`) to the paper's value.

    ``partial``: the settings are a step towards the paper's form, not the form itself (``note`` says what is
    still missing). ``reading``: the paper does not say which form it used and the settings give the other
    reading. ``note``: one clause shown after the settings."""

    settings: Mapping[str, Any]
    partial: bool = False
    reading: bool = False
    note: str = ""

    def __post_init__(self):
        if not self.settings:
            raise ValueError("a switch needs at least one setting")

    def read(self, config) -> dict:
        """``{key: the value config trains with}``, in the order of ``settings``."""
        return {key: read_setting(config, key) for key in self.settings}

    def matches(self, config) -> bool:
        """Whether ``config`` already trains with every setting of the switch."""
        return all(_same(value, self.settings[key]) for key, value in self.read(config).items())

    def apply(self, config):
        """``config`` with the switch's settings (checked by the config and the method as any config is)."""
        changes: dict = {}
        method = dict(config.method_params)
        loss = dict(config.loss_params)
        for key, value in self.settings.items():
            kind, name = _kind(key)
            {"method": method, "loss": loss, "config": changes}[kind][name] = value
        return config.replace(method_params=method, loss_params=loss, **changes)

    def label(self) -> str:
        """The switch column's cell: the settings in Markdown code, with what they give."""
        text = ", ".join(_assignment(key, value) for key, value in self.settings.items())
        if self.partial:
            text = f"partly: {text}"
        elif self.reading:
            text = f"the other reading: {text}"
        return f"{text} ({self.note})" if self.note else text


def _assignment(key: str, value, config=None) -> str:
    kind, name = _kind(key)
    code = f"Config.{name}={_show(value)}" if kind == "config" else f"{name}={_show(value)}"
    text = {"method": "method parameter ", "loss": "loss parameter ", "config": ""}[kind] + f"`{code}`"
    if value is None and config is not None and name in _IMPLIED:
        words, implied = _IMPLIED[name]
        text += f" ({words} = {_show(implied(config))})"
    return text


# ----------------------------------------------------------------------------------------------------
# A row


@dataclass(frozen=True)
class Deviation:
    """One way the book's runs differ from a paper's recipe (see the module docstring).

    ``config`` builds the config the chapter trains for this row (default: the real profile's); ``book_form``
    is formatted with :func:`namespace` of it (or, a function, called with that namespace). ``switch``: the
    settings that give the paper's form, or ``None``; ``no_switch`` then says why there is none (shown in the switch
    column, default "none"). ``key``: for the rows of :func:`common_rows`, their entry of :data:`COMMON`."""

    what: str
    paper_form: str
    book_form: str | Callable[[dict], str]
    reason: str
    switch: Switch | None = None
    no_switch: str = ""
    config: Callable = field(default=real_config, compare=False, repr=False)
    key: str = ""

    def book_cell(self) -> str:
        """The book-default cell, read from the code now."""
        config = self.config()
        values = namespace(config)
        prose = self.book_form(values) if callable(self.book_form) else self.book_form.format(**values)
        if self.switch is None:
            return prose
        current = ", ".join(_assignment(key, value, config) for key, value in self.switch.read(config).items())
        if self.switch.matches(config):
            return f"{current}: " + self._matched(("as the switch sets it", "the other reading", "the paper's form"))
        return f"{current}: {prose}"

    def _matched(self, words: tuple[str, str, str]) -> str:
        return words[0] if self.switch.partial else words[1] if self.switch.reading else words[2]

    def switch_cell(self) -> str:
        return self.switch.label() if self.switch is not None else (self.no_switch or "none")

    def reason_cell(self) -> str:
        if self.switch is not None and self.switch.matches(self.config()):
            return self._matched((self.reason, "the other reading is the default now", "no longer differs"))
        return self.reason


def namespace(config) -> dict:
    """What ``book_form`` may quote: ``config`` (the chapter's config), ``p`` (its method's parameters, defaults
    filled in), ``loss`` (its loss's parameters, defaults filled in), ``head_lr`` (the rate of the new layers,
    ``new_layer_mult * lr``), ``method_lr`` (the rate of the method's own parameters), the profiles ``real``,
    ``quick`` and ``full`` (:data:`zslib.engine.profile.PROFILES`), ``adapted``
    (:data:`~zslib.engine.profile.ADAPTED_REAL`), the real dataset's split sizes ``n_seen``, ``n_unseen`` (images),
    ``seen_classes``, ``unseen_classes``, and
    ``passes``, the config's passes over the seen images."""
    real = PROFILES["real"]
    official = get_dataset_class(real.dataset).official
    head_lr = config.lr * config.new_layer_mult
    return {"config": config, "p": get_method(config.method).settings(config.method_params),
            "loss": {**LOSSES[config.loss].defaults, **config.loss_params}, "head_lr": head_lr,
            "method_lr": config.objective_lr if config.objective_lr is not None else head_lr,
            "real": real, "quick": PROFILES["quick"], "full": PROFILES["full"], "adapted": ADAPTED_REAL,
            "n_seen": official["train"][0], "seen_classes": official["train"][1],
            "n_unseen": official["test"][0], "unseen_classes": official["test"][1],
            "passes": config.iterations * config.batch_classes * config.batch_per_class / official["train"][0]}


# ----------------------------------------------------------------------------------------------------
# The rows every paper shares

_NETWORK = ("an ImageNet `{real.backbone}` kept frozen, its maps computed once per image and cached; only the "
            "embedding head and the method's own modules train (the quick profile trains a small `{quick.backbone}` "
            "from scratch on SynthParts images)")
_DATA = ("Oxford Flowers-102 with Adapt-Adv's zero-shot split: the first {seen_classes} classes seen ({n_seen:,} "
         "images), the other {unseen_classes} unseen ({n_unseen:,}); the copy the book is built from stores the "
         "photographs at 160 px on the short side, upsampled to {real.resize_size} px and centre-cropped to "
         "{real.image_size} px")
_AUGMENTATION = ("none: each photograph is seen as its one {real.image_size}-px centre crop, whose maps are "
                 "cached once (the adapted regime adds its mirror image as a second view)")
_BUDGET = ("{config.iterations} steps of Adam on batches of {config.batch_classes} classes × "
           "{config.batch_per_class} images ({passes:.1f} passes over the seen images); the quick profile "
           "{quick.iterations} steps")


def common_rows(paper: Mapping[str, str], config: Callable = real_config, *, book: Mapping[str, str] | None = None,
                network_switch: bool = True, notes: Mapping[str, str] | None = None,
                reasons: Mapping[str, str] | None = None) -> tuple[Deviation, ...]:
    """The rows every paper's table holds, one per key of :data:`COMMON`, in that order: ``paper`` gives the
    paper's side of each (with its section), the book's side is shared (``book`` may replace one where the
    method uses the shared setting differently, as ZSML, which trains no head). ``config`` builds the chapter's
    config. The backbone row names the adapted regime (:data:`zslib.engine.profile.ADAPTED_REAL`) as a partial
    switch unless ``network_switch`` is false; ``notes`` replaces a row's switch column where it has no switch, and
    ``reasons`` a row's reason."""
    missing = sorted(set(COMMON) - set(paper))
    if missing:
        raise ValueError(f"the paper's side of the common rows {missing} is missing")
    notes = dict(notes or {})
    forms = {"network": _NETWORK, "data": _DATA, "augmentation": _AUGMENTATION, "budget": _BUDGET, **(book or {})}
    why = {"network": "A CPU cannot fine-tune an ImageNet network for thousands of steps in a chapter's time; with "
                      "frozen, cached features a run takes seconds, so every row gets five seeds and an interval.",
           "data": "Flowers-102 is small enough to cache on a laptop and has a published zero-shot split; the papers' "
                   "datasets run on the `full` profile (`Config.dataset`, e.g. `'cub200'`).",
           "augmentation": "Cached maps are computed once per image; random crops would need the network at every "
                           "step.",
           "budget": "The real profile's length and rate were chosen with the triplet loss on a class-disjoint "
                     "validation split of the seen classes (`zslib.engine.profile`); a head on frozen features fits "
                     "in a few hundred steps.", **(reasons or {})}
    adapted = Switch({"train_stages": tuple(ADAPTED_REAL["train_stages"])}, partial=True,
                     note="the adapted regime `zslib.engine.profile.ADAPTED_REAL`: the last MBConv block and the "
                          "1×1 head convolution train from the ImageNet weights; the papers' end-to-end "
                          "fine-tuning is the `full` profile, `ZS_PROFILE=full`, on a GPU")
    return (
        Deviation("Backbone and its training", paper["network"], forms["network"], why["network"],
                  switch=adapted if network_switch else None, no_switch=notes.get("network", ""), config=config,
                  key="network"),
        Deviation("Data", paper["data"], forms["data"], why["data"],
                  no_switch=notes.get("data", "none on the real profile"), config=config, key="data"),
        Deviation("Augmentation", paper["augmentation"], forms["augmentation"], why["augmentation"],
                  no_switch=notes.get("augmentation", "none on the real profile (the `full` profile crops and "
                                                      "mirrors at random)"), config=config, key="augmentation"),
        Deviation("Training length and batch", paper["budget"], forms["budget"], why["budget"],
                  no_switch=notes.get("budget", "`Config.iterations`, `batch_classes`, `batch_per_class` set "
                                                "them; no value makes a frozen head the paper's network"),
                  config=config, key="budget"),
    )


# ----------------------------------------------------------------------------------------------------
# The table


def deviations(paper_key: str) -> tuple[Deviation, ...]:
    """The rows of ``paper_key``'s table: what its :class:`~zslib.engine.paper.Paper` record's ``deviations()``
    gives (``DEVIATIONS`` of ``zslib/methods/<paper_key>/deviations.py``), checked to hold the common rows."""
    if paper_key not in PAPERS:
        raise KeyError(f"no deviation table for {paper_key!r}; the papers are {list(PAPERS)}")
    rows = tuple(PAPERS[paper_key].deviations())
    keys = [row.key for row in rows if row.key]
    if keys != list(COMMON):
        raise ValueError(f"{paper_key}'s table must hold the common rows {list(COMMON)} once each, in order; it holds "
                         f"{keys}")
    return rows


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown_table(rows) -> str:
    """``rows`` (:class:`Deviation`) as a Markdown table, every book-default cell read from the code now."""
    head = ("What", "The paper", "The book by default", "The paper's form by a switch", "Why the default stays")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = (f"**{row.what}**", row.paper_form, row.book_cell(), row.switch_cell(), row.reason_cell())
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def deviation_table(paper_key: str) -> str:
    """Markdown: every way the book's runs of ``paper_key`` (a key of :data:`zslib.engine.registry.PAPERS`, e.g.
    ``"deml"``) depart from the paper's recipe, one row each (see the module docstring)."""
    return markdown_table(deviations(paper_key))
