"""Interactive explorers: move a control, watch a method respond -- live in a notebook, and on the static page.

Each explorer is a function of a few controls (a query photograph, a model, a number of random-walk
steps, a weight) that returns one *frame*: a small piece of HTML (a picture as a ``data:`` URI and the
numbers beside it) and the numbers themselves (:attr:`Frame.data`, what the tests check). The same
frame function serves two modes:

* **live** (Jupyter, JupyterLab, VS Code, Colab): ipywidgets controls; every change calls the frame
  function again, so the neighbours, maps and labels are computed from the values chosen, also values
  the static page does not carry (the live menus are longer than the static ones);
* **static** (the rendered book, no kernel): the frames of a small grid of control values are computed
  once, when the chapter is executed, and embedded in the page as JSON beside a small self-contained
  script (:data:`_SCRIPT`, about 30 lines, no library) that shows the frame of the controls' values.

Why a self-contained view and not the widgets' embedded state. ipywidgets can save its state in the
notebook and Jupyter Book (myst-nb) renders it -- but only through the widget manager JavaScript
(``@jupyter-widgets/html-manager`` and RequireJS), which myst-nb loads from a CDN (jsDelivr and cdnjs;
the ``nb_ipywidgets_js`` setting). A reader offline, and the book's browser tests, which answer CDN
requests for MathJax only, would get a blank space or an "Error displaying widget". Worse, saved widget
state holds values, not computations: a control linked to an output only with ``jslink`` can move
another widget's value, not draw a new picture, so every picture would have to be a widget of its own
anyway. Plotting libraries that stay interactive in HTML (plotly, bokeh, altair) bring megabytes of
JavaScript to inline or fetch and are not dependencies of the book. The view here is a few hundred bytes
of script per explorer, needs nothing from the network (the images are ``data:`` URIs: small JPEG
thumbnails for photographs, PNG for plots) and shows exactly the frames the kernel computed.

How one output carries both modes. An explorer's display is one MIME bundle holding the widget view
(``application/vnd.jupyter.widget-view+json``) *and* the static view (``text/html``): a frontend with a
widget manager draws the live widget; one without (a notebook viewer, Colab before
``output.enable_custom_widget_manager()``, the book) draws the static view, so no reader meets "Error
displaying widget". The book build sets ``ZS_EXPLORERS=static`` (``scripts/build_book.py``): the
explorers then output the static view alone, so the page carries no widget state either; ``_config.yml``
also tells myst-nb to skip the widget view in HTML
(``nb_mime_priority_overrides``) and to load no widget JavaScript (``nb_ipywidgets_js``). On Colab the
chapters' setup cell enables the custom widget manager; displaying an explorer there does it again,
harmless when it is done already.

The explorers (each names the paper and equation it shows):

* :func:`retrieval` -- an unseen query and its k nearest neighbours under several models, with
  correct (green) and wrong (red) frames and the query's Recall@1 and Recall@k;
* :func:`retrieval_of_runs` -- the same for runs given by their configurations (trained again in seconds
  on the real profile's cached features, or loaded where the results folder holds their weights, with the
  Flowers-102 photographs);
* :func:`embedding` -- a 2-D t-SNE map of unseen classes per model; pointing at a dot shows its photo.

Each paper's own explorer (the equation it shows, as a slider) lives beside the paper, in
``zslib/methods/<paper>/explore.py``, built from this framework, and its ``Paper`` record names it.
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
import itertools
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import matplotlib as mpl
import matplotlib.pyplot as plt
import numpy as np
import torch
from PIL import Image

from zslib.analysis.photos import missing_photos_text
from zslib.analysis.viz import project_2d, to_display
from zslib.engine.config import Config
from zslib.engine.data import get_dataset_class, test_transform
from zslib.engine.data.errors import MissingDataError
from zslib.engine.evaluate import knn
from zslib.engine.grid import run_many
from zslib.engine.models import normalization
from zslib.engine.registry import get_method
from zslib.engine.runner import build_data, build_model, load_model
from zslib.engine.store import load_result, result_path, results_dir
from zslib.engine.train import embed, set_seed

__all__ = ["Control", "Frame", "Explorer", "show", "retrieval", "retrieval_of_runs", "embedding", "embeddings_of",
           "models_of_runs", "jpeg_uri", "figure_uri"]

CORRECT = "#2ca02c"
WRONG = "#d62728"
QUERY = "#1f77b4"


# ---------------------------------------------------------------------------------------------------- frames

@dataclass
class Control:
    """One control: a name, its options ``[(label, value), ...]`` offered live, and the indices of the
    options the static page carries (all of them by default), ``label`` the text beside it. ``kind``: ``"select"`` (a menu) or
    ``"slider"`` (ordered values)."""

    name: str
    options: list
    kind: str = "select"
    static: Sequence[int] | None = None
    default: int = 0
    label: str | None = None  # what the reader sees (default: the name, which is the frame function's keyword)

    def __post_init__(self):
        self.options = [o if isinstance(o, tuple) else (_label(o), o) for o in self.options]
        if not self.options:
            raise ValueError(f"control {self.name!r} has no options")
        if self.kind not in ("select", "slider"):
            raise ValueError(f"control {self.name!r}: kind must be 'select' or 'slider', got {self.kind!r}")
        n = len(self.options)
        self.static = list(range(n)) if self.static is None else sorted(set(int(i) for i in self.static))
        if not self.static or not all(0 <= i < n for i in self.static):
            raise ValueError(f"control {self.name!r}: static indices must lie in 0..{n - 1}, got {self.static}")
        if self.default not in self.static:
            self.default = self.static[0]
        self.label = self.label or self.name


def _label(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


@dataclass
class Frame:
    """What an explorer shows for one setting of its controls: ``html`` (pictures as ``data:`` URIs,
    numbers as text) and ``data``, the numbers behind it."""

    html: str
    data: dict = field(default_factory=dict)


class Explorer:
    """Controls and a frame function ``render(**values) -> Frame``; displays live or static (module docstring).

    ``frame(**values)`` computes (and caches) a frame; ``set(**values)`` moves the live controls as a
    reader would (the tests use it); ``value`` is the frame on display in the live widget;
    ``static_html()`` is the self-contained page fragment the book shows.
    """

    def __init__(self, title: str, controls: Sequence[Control], render: Callable[..., Frame], *,
                 note: str = "", style: str = ""):
        self.title, self.controls, self._render, self.note, self.style = title, list(controls), render, note, style
        names = [c.name for c in self.controls]
        if len(set(names)) != len(names):
            raise ValueError(f"control names must differ, got {names}")
        self._cache: dict = {}
        self._widget = None
        self._view = None
        self.values = {c.name: c.options[c.default][1] for c in self.controls}

    # -- computation
    def frame(self, **values) -> Frame:
        unknown = set(values) - set(self.values)
        if unknown:
            raise KeyError(f"unknown control(s) {sorted(unknown)}; this explorer has {sorted(self.values)}")
        chosen = {**self.values, **values}
        key = tuple(_hashable(chosen[c.name]) for c in self.controls)
        if key not in self._cache:
            out = self._render(**chosen)
            if not isinstance(out, Frame):
                raise TypeError(f"the frame function of {self.title!r} must return a Frame, got {type(out).__name__}")
            self._cache[key] = out
        return self._cache[key]

    @property
    def value(self) -> Frame:
        """The frame of the current control values."""
        return self.frame()

    def set(self, **values) -> Frame:
        """Set control values (the live widgets follow) and return the new frame."""
        for name, v in values.items():
            control = self._control(name)
            if not any(_same(v, o) for _, o in control.options):
                raise ValueError(f"{v!r} is not an option of {name!r}; options: {[o for _, o in control.options]}")
        self.values.update(values)
        if self._widget is not None:
            for w, c in zip(self._widget_controls, self.controls):
                if not _same(w.value, self.values[c.name]):
                    w.value = self.values[c.name]  # its observer redraws
        return self.value

    def _control(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        raise KeyError(f"no control {name!r}; this explorer has {[c.name for c in self.controls]}")

    # -- static view
    def static_html(self) -> str:
        """The explorer as self-contained HTML: controls over the precomputed frames, no network request."""
        states = {}
        for combo in itertools.product(*[c.static for c in self.controls]):
            values = {c.name: c.options[i][1] for c, i in zip(self.controls, combo)}
            states[",".join(map(str, combo))] = self.frame(**values).html
        spec = {"controls": [[label for label, _ in c.options] for c in self.controls], "states": states}
        uid = "zs-explorer-" + hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
        parts = [f'<div class="zs-explorer" id="{uid}" style="{_BOX}">',
                 f'<div style="font-weight:600;margin-bottom:4px">{html.escape(self.title)}</div>',
                 '<div class="zs-controls" style="margin-bottom:6px">']
        for k, c in enumerate(self.controls):
            parts.append(f'<label style="margin-right:14px">{html.escape(c.label)} ')
            if c.kind == "select":
                opts = "".join(f'<option value="{i}"{" selected" if i == c.default else ""}>'
                               f'{html.escape(c.options[i][0])}</option>' for i in c.static)
                parts.append(f'<select data-zs-control="{k}" aria-label="{html.escape(c.label)}">{opts}</select>')
            else:
                parts.append(f'<input type="range" data-zs-control="{k}" aria-label="{html.escape(c.label)}" '
                             f'min="0" max="{len(c.static) - 1}" step="1" value="{c.static.index(c.default)}" '
                             f'data-zs-steps="{",".join(map(str, c.static))}" style="vertical-align:middle">'
                             f' <output data-zs-label="{k}">{html.escape(c.options[c.default][0])}</output>')
            parts.append("</label>")
        parts.append("</div>")
        first = ",".join(str(c.default) for c in self.controls)
        # the frame shown first is in the page once: the script reads it back from the view
        parts.append(f'<div class="zs-view" data-zs-initial="{first}">{states.pop(first)}</div>')
        if self.note:
            parts.append(f'<div style="font-size:85%;color:#555;margin-top:4px">{html.escape(self.note)}</div>')
        data = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")
        parts.append(f'<script type="application/json" class="zs-states">{data}</script>')
        parts.append(f"<script>{_SCRIPT.replace('__ID__', uid)}</script>")
        if self.style:
            parts.append(f"<style>{self.style.replace('__ID__', uid)}</style>")
        parts.append("</div>")
        return "".join(parts)

    # -- live view
    def widget(self):
        """The live ipywidgets view (built once): the controls and an HTML output redrawn on every change."""
        if self._widget is not None:
            return self._widget
        import ipywidgets as W  # optional (zslib[notebook]): only the live view needs it

        ws = []
        for c in self.controls:
            cls = W.Dropdown if c.kind == "select" else W.SelectionSlider
            w = cls(options=c.options, value=self.values[c.name], description=c.label,
                    style={"description_width": "initial"}, layout=W.Layout(width="auto", min_width="280px"))
            if c.kind == "slider":
                w.continuous_update = False
            ws.append(w)
        view = W.HTML(value=self.value.html)

        def redraw(change, name):
            self.values[name] = change["new"]
            view.value = self.value.html

        for w, c in zip(ws, self.controls):
            w.observe(lambda change, name=c.name: redraw(change, name), names="value")
        title = W.HTML(value=f"<b>{html.escape(self.title)}</b>"
                             + (f'<style>{self.style.replace("#__ID__", ".zs-live")}</style>' if self.style else ""))
        box = W.VBox([title, W.HBox(ws), view])
        box.add_class("zs-live")
        self._widget, self._widget_controls, self._view = box, ws, view
        return box

    def _repr_mimebundle_(self, include=None, exclude=None):
        bundle = {"text/plain": f"<explorer: {self.title}>", "text/html": self.static_html()}
        try:
            import ipywidgets  # noqa: F401  (optional, zslib[notebook]: without it the static view is shown)
            from IPython import get_ipython
        except ImportError:
            return bundle
        if get_ipython() is None or not getattr(get_ipython(), "kernel", None):
            return bundle  # no kernel (a script, a test): only the static view
        if os.environ.get("ZS_EXPLORERS", "").strip().lower() == "static":
            return bundle  # the book build (scripts/build_book.py): no widget state for the page to carry
        _enable_colab_widgets()
        widget_bundle = self.widget()._repr_mimebundle_()
        if widget_bundle:
            bundle.update({k: v for k, v in widget_bundle.items() if k != "text/plain"})
        return bundle


def show(explorer: Explorer) -> Explorer:
    """Display ``explorer`` (live where a widget frontend runs, the static view elsewhere) and return it."""
    from IPython.display import display  # optional (zslib[notebook]), as in every chapter

    display(explorer)
    return explorer


def _enable_colab_widgets() -> None:
    if "google.colab" in sys.modules:
        try:
            from google.colab import output  # only on Colab
            output.enable_custom_widget_manager()
        except Exception:  # an older Colab runtime: its built-in widgets still show the core controls
            pass


def _hashable(v):
    if isinstance(v, (list, np.ndarray)):
        return tuple(np.asarray(v).ravel().tolist())
    return v


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return a is b


_BOX = "border:1px solid #ccc;border-radius:6px;padding:8px 10px;margin:8px 0;overflow-x:auto"

#: The static view's script: show the precomputed frame of the controls' values (no library, no network).
_SCRIPT = """(function () {
  var root = document.getElementById("__ID__");
  if (!root || root.dataset.zsReady) return;
  root.dataset.zsReady = "1";
  var spec = JSON.parse(root.querySelector("script.zs-states").textContent);
  var controls = Array.prototype.slice.call(root.querySelectorAll("[data-zs-control]"));
  var view = root.querySelector(".zs-view");
  spec.states[view.getAttribute("data-zs-initial")] = view.innerHTML;
  function index(c) {
    if (c.tagName === "SELECT") return c.value;
    return c.getAttribute("data-zs-steps").split(",")[+c.value];
  }
  function show() {
    var key = controls.map(index).join(",");
    controls.forEach(function (c) {
      var k = c.getAttribute("data-zs-control");
      var out = root.querySelector('[data-zs-label="' + k + '"]');
      if (out) out.textContent = spec.controls[+k][+index(c)];
    });
    if (spec.states[key] !== undefined) view.innerHTML = spec.states[key];
  }
  controls.forEach(function (c) {
    c.addEventListener("input", show);
    c.addEventListener("change", show);
  });
})();"""


# ---------------------------------------------------------------------------------------------------- pictures

def jpeg_uri(image: np.ndarray, quality: int = 80) -> str:
    """An (H, W, 3) float image in [0, 1] (or uint8) as a ``data:image/jpeg`` URI."""
    arr = np.asarray(image)
    if arr.dtype != np.uint8:
        arr = (np.clip(arr, 0, 1) * 255).round().astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format="JPEG", quality=quality)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def figure_uri(fig, dpi: int = 80, fmt: str = "png") -> str:
    """A matplotlib figure as a ``data:`` URI (the figure is closed): ``fmt`` ``"png"`` for plots, ``"jpeg"``
    for figures of photographs (several times smaller)."""
    if fmt not in ("png", "jpeg"):
        raise ValueError(f"fmt must be 'png' or 'jpeg', got {fmt!r}")
    buf = io.BytesIO()
    extra = {"pil_kwargs": {"quality": 80}} if fmt == "jpeg" else {}
    fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", **extra)
    plt.close(fig)
    return f"data:image/{fmt};base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _thumbnail(image, side: int, mean=None, std=None) -> np.ndarray:
    """A display image resized to ``side`` pixels on its longer edge, uint8."""
    arr = (to_display(image, mean, std) * 255).round().astype(np.uint8)
    img = Image.fromarray(arr)
    scale = side / max(img.size)
    if scale != 1:
        img = img.resize((max(1, round(img.size[0] * scale)), max(1, round(img.size[1] * scale))), Image.BILINEAR)
    return np.asarray(img)


def _framed(thumb: np.ndarray, colour: str, width: int = 3) -> np.ndarray:
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)
    out = np.empty((thumb.shape[0] + 2 * width, thumb.shape[1] + 2 * width, 3), dtype=np.uint8)
    out[:] = rgb
    out[width:-width, width:-width] = thumb
    return out


def _strip(tiles: Sequence[np.ndarray], gap: int = 4) -> np.ndarray:
    h = max(t.shape[0] for t in tiles)
    cols = []
    for t in tiles:
        pad = np.full((h, t.shape[1], 3), 255, np.uint8)
        pad[:t.shape[0]] = t
        cols += [pad, np.full((h, gap, 3), 255, np.uint8)]
    return np.concatenate(cols[:-1], axis=1)


def _image(dataset_or_images, i: int):
    item = dataset_or_images[int(i)]
    return item[0] if isinstance(item, (tuple, list)) else item


def embeddings_of(model_or_array, dataset):
    """An (n, d) float32 array: given embeddings as they are, a network's embeddings of ``dataset`` (what every
    explorer of embeddings draws, the papers' own included)."""
    if isinstance(model_or_array, torch.nn.Module):
        return embed(model_or_array, dataset)[0].numpy().astype(np.float32)
    arr = model_or_array.detach().cpu().numpy() if hasattr(model_or_array, "detach") else np.asarray(model_or_array)
    if arr.ndim != 2:
        raise ValueError(f"embeddings must be (n, d), got shape {arr.shape}")
    return arr.astype(np.float32)


def _labels(dataset, labels):
    if labels is not None:
        return np.asarray(labels.detach().cpu() if hasattr(labels, "detach") else labels).astype(np.int64)
    if hasattr(dataset, "labels"):
        return np.asarray(dataset.labels).astype(np.int64)
    return np.asarray([int(dataset[i][1]) for i in range(len(dataset))])


def _spread_queries(labels: np.ndarray, count: int, seed: int) -> list[int]:
    """``count`` distinct images, one per class while classes last (then more of the same classes), seeded."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(labels.size)
    first, rest, seen = [], [], set()
    for i in order:
        (rest if labels[i] in seen else first).append(int(i))
        seen.add(labels[i])
    return (first + rest)[:count]


# ---------------------------------------------------------------------------------------------------- explorers

def retrieval(dataset, models: Mapping[str, object], *, labels=None, k: int = 5, queries: int = 24,
              static_queries: int = 8, mean=None, std=None, metric: str = "cosine", seed: int = 0,
              thumb: int = 56) -> Explorer:
    """Retrieval explorer: an unseen query and its ``k`` nearest neighbours under each model.

    ``dataset``: the unseen images (a dataset of ``(image, label)``, e.g. ``data["unseen"]``); ``models``:
    ``{name: network or (n, d) embeddings of dataset}``, e.g. the untrained network, the baseline and
    the method. Neighbours are found leave-one-out among the unseen images with the book's
    :func:`zslib.engine.evaluate.knn` (cosine by default, as the chapters evaluate); a neighbour of the
    query's class gets a green frame, another a red one. The query's Recall@1 and Recall@k (1 when one of
    the first 1 or k neighbours shares its class) are printed per model. The live menu offers ``queries``
    photographs of different classes; the static page carries the first ``static_queries``. The query shown
    first is one that at least one model answers right at rank 1, when the menu holds such a query.
    """
    if not models:
        raise ValueError("give at least one model: {name: network or embeddings}")
    y = _labels(dataset, labels)
    embs = {name: embeddings_of(m, dataset) for name, m in models.items()}
    for name, e in embs.items():
        if e.shape[0] != y.size:
            raise ValueError(f"model {name!r}: {e.shape[0]} embeddings for {y.size} images")
    picks = _spread_queries(y, queries, seed)
    # leave-one-out by hand: the query (gallery row picks[i]) is dropped from its own list
    n_plus = {name: knn(e[picks], e, k=min(k + 1, y.size), metric=metric, exclude_self=False,
                        backend="torch").indices.numpy() for name, e in embs.items()}
    neighbours = {}
    for name in embs:
        neighbours[name] = np.stack([[j for j in row if j != q][:k] for q, row in zip(picks, n_plus[name])])
    # the query shown first is one that some model answers right at rank 1 (when there is one): a reader's first
    # look shows what a correct neighbour looks like, the later queries show the misses
    right = [any(y[neighbours[name][q, 0]] == y[p] for name in embs) for q, p in enumerate(picks)]
    if any(right) and not right[0]:
        first = right.index(True)
        order = [first] + [q for q in range(len(picks)) if q != first]
        picks = [picks[q] for q in order]
        neighbours = {name: nb[order] for name, nb in neighbours.items()}
    thumbs: dict[int, np.ndarray] = {}

    def tile(i):
        if i not in thumbs:
            thumbs[i] = _thumbnail(_image(dataset, i), thumb, mean, std)
        return thumbs[i]

    def render(query):
        q = picks.index(query)
        rows, data = [], {"query": int(query), "label": int(y[query]), "neighbours": {}, "recall@1": {},
                          f"recall@{k}": {}}
        for name in embs:
            nb = neighbours[name][q]
            hits = y[nb] == y[query]
            data["neighbours"][name] = nb.tolist()
            data["recall@1"][name] = float(hits[:1].any())
            data[f"recall@{k}"][name] = float(hits.any())
            strip = _strip([_framed(tile(query), QUERY)] + [_framed(tile(j), CORRECT if h else WRONG)
                                                             for j, h in zip(nb, hits)])
            rows.append(f'<tr><td style="padding:2px 8px 2px 0;vertical-align:middle"><b>{html.escape(name)}</b><br>'
                        f'R@1 = {data["recall@1"][name]:.0f}, R@{k} = {data[f"recall@{k}"][name]:.0f}<br>'
                        f'{int(hits.sum())} of {k} correct</td>'
                        f'<td><img alt="{html.escape(name)}: query and {k} neighbours" src="{jpeg_uri(strip)}"></td></tr>')
        return Frame(f'<div>query: image {query} (class {y[query]}); blue = query, green = same class, '
                     f'red = another class</div><table style="border:none">{"".join(rows)}</table>', data)

    control = Control("query", [(f"image {i} (class {y[i]})", i) for i in picks], "select",
                      static=range(min(static_queries, len(picks))))
    return Explorer(f"Unseen queries and their {k} nearest neighbours", [control], render,
                    note=f"{len(picks)} queries live, {len(control.static)} on the static page; "
                         f"leave-one-out among {y.size} unseen images, {metric} similarity.")


def _stored_with_weights(config):
    """The finished run of ``config`` in the results folder when its checkpoint is there too (a chapter's grid trained
    it already: the same config hash is the same run), else ``None``; a recorded run (metrics only) has no weights."""
    path = result_path(config, results_dir())
    if not path.exists():
        return None
    result = load_result(path)
    return result if result.checkpoint is not None and result.checkpoint.is_file() else None


def _trained_runs(configs: Mapping[str, object]) -> tuple[dict, list]:
    """``({name: Result}, reused)``: a finished run with its checkpoint for each of ``configs`` (runs that train). A
    run the results folder holds with its weights is loaded (:func:`_stored_with_weights`; ``reused`` lists their
    names), the others are trained together by :func:`zslib.engine.grid.run_many` (one run per core) into
    ``results/explorers/``, their own folder, so that a recorded result (metrics only) is never overwritten; a run
    stored there with its checkpoint is loaded."""
    found = {name: _stored_with_weights(c) for name, c in configs.items()}
    reused = [name for name, r in found.items() if r is not None]
    missing = {name: c for name, c in configs.items() if found[name] is None}
    if missing:
        folder = results_dir() / "explorers"
        # A results folder's own recorded/ sub-folder is where its recorded runs are looked up
        # (zslib.engine.store.recorded_dir); an empty one here keeps the runs installed with zslib (metrics only,
        # no weights) from standing in for the runs this explorer must train.
        (folder / "recorded").mkdir(parents=True, exist_ok=True)
        trained = run_many(list(missing.values()), results_dir=folder, progress=False)
        weightless = [r.path.name for r in trained if r.checkpoint is None or not r.checkpoint.is_file()]
        if weightless:
            raise RuntimeError(f"the explorer needs trained weights, but {', '.join(weightless)} has none; delete "
                               f"it from {folder} to train it again")
        found.update(zip(missing, trained))
    return found, reused


def _origin_note(seed: int, names: Sequence[str], reused: Sequence[str], label: Callable[[str], str] = str) -> str:
    """The sentence of an explorer's note that says where its trained networks come from: seed ``seed`` of each of
    the runs ``names``, those in ``reused`` loaded with the weights the results folder holds, the others trained
    again from their configurations; ``label`` names a run in the sentence."""
    if not reused:
        return f" Seed {seed} of each run, trained again from its configuration."
    listed = ", ".join(label(n) for n in reused)
    if len(reused) == len(names):
        return f" Seed {seed} of each run, the stored runs ({listed}) loaded with their weights."
    several = len(reused) > 1
    return (f" Seed {seed} of each run; {listed}: the run{'s' if several else ''} stored in the results folder, "
            f"loaded with {'their' if several else 'its'} weights; the others trained again from their configurations.")


def models_of_runs(configs: Mapping[str, object], seed: int, fallback: str | None,
                   label: Callable[[str], str] = str):
    """The trained networks of ``configs`` (each at ``seed``), their unseen split, the first config, a note on the
    data and a sentence on where the networks come from (:func:`_origin_note`, naming runs by ``label``): what
    :func:`retrieval_of_runs` and a paper's explorer of runs (e.g. CML's weight slider) show; public for the papers'
    explorers (``zslib.methods.<paper>.explore``). A run that trains is loaded with its checkpoint when
    the results folder holds it (e.g. a run of the chapter's table), else trained again, the missing runs in
    parallel, in ``results/explorers/`` (:func:`_trained_runs`); the pretrained features are built as :func:`run`
    would. Without the configs' data, and with ``fallback`` a profile, the same methods and losses run on that
    profile instead."""
    configs = {name: c.replace(seed=seed) for name, c in configs.items()}
    first = next(iter(configs.values()))
    note = ""
    profile, dataset = first.profile, first.dataset
    try:
        data = build_data(first)
    except (MissingDataError, FileNotFoundError) as err:
        if fallback is None:
            raise
        quick = Config.from_profile(fallback)
        configs = {name: quick.replace(seed=seed, method=c.method, method_params=c.method_params, loss=c.loss,
                                       loss_params=c.loss_params) for name, c in configs.items()}
        first = next(iter(configs.values()))
        data = build_data(first)
        missing = missing_photos_text(err, profile=profile, dataset=dataset, markdown=False)
        note = f"{missing} Meanwhile the same methods run on the {fallback} profile. "
    unseen = data["unseen"]
    for name, c in configs.items():
        if (c.dataset, c.backbone, c.image_size) != (first.dataset, first.backbone, first.image_size):
            raise ValueError(f"{name!r} reads other data than {next(iter(configs))!r}; give runs of one dataset")
    trains = {name: c for name, c in configs.items() if get_method(c.method).trains}
    runs, reused = _trained_runs(trains)
    models = {}
    for name, c in configs.items():
        if name in runs:
            models[name] = load_model(runs[name], device="cpu")
        else:  # nothing to train (the pretrained features): the network as run() would build it
            set_seed(c.seed)
            models[name] = build_model(c).eval()
    return models, unseen, first, note, _origin_note(seed, list(trains), reused, label)


def retrieval_of_runs(configs: Mapping[str, object], *, seed: int = 0, fallback: str | None = "quick",
                      **kwargs) -> Explorer:
    """The retrieval explorer (:func:`retrieval`) of runs given by their configurations, e.g. the untrained
    pretrained features, a baseline and a method of the real profile (Flowers-102 photographs).

    A recorded result keeps metrics, not weights, so each configuration (with ``seed``) is trained again, the
    missing runs in parallel (:func:`zslib.engine.grid.run_many`), into ``results/explorers/`` (a run of the real
    profile trains a head on the cached features: seconds; a result with its checkpoint there is loaded instead; a
    recorded result in ``results/recorded/`` is left alone); a run the results folder holds with its checkpoint (one
    a chapter trained already) is loaded, not trained again. Where the configurations' data
    is absent (no Flowers-102 under ``$ZS_DATA``) and ``fallback`` names a profile, the same methods and
    losses run on that profile instead (SynthParts for ``"quick"``), and the explorer says so. The
    photographs shown come from the dataset itself, or, where a run reads cached features, from the image
    dataset of the same split in the same order (checked). ``kwargs`` go to :func:`retrieval`.
    """
    models, unseen, first, note, origin = models_of_runs(configs, seed, fallback)
    mean, std = normalization(first.backbone)
    images = unseen
    if unseen[0][0].ndim == 1:  # cached pooled features: the photographs of the same split, in the same order
        images = get_dataset_class(first.dataset)(split="test", transform=test_transform(
            first.image_size, first.resize_size, mean, std))
        if not np.array_equal(np.asarray(images.labels), np.asarray(unseen.labels)):
            raise RuntimeError("the cached features and the image dataset list the unseen images in different "
                               "orders; rebuild the feature cache (zslib.engine.data.features)")
    embs = {name: embeddings_of(m, unseen) for name, m in models.items()}
    explorer = retrieval(images, embs, labels=np.asarray(unseen.labels), mean=mean, std=std, **kwargs)
    explorer.note = note + explorer.note + origin
    return explorer


def embedding(models: Mapping[str, object], dataset=None, *, labels=None, images=None, classes: int = 8,
              per_class: int = 12, mean=None, std=None, seed: int = 0, thumb: int = 48, size: int = 360,
              max_iter: int = 500, knob: str = "model", kind: str = "select",
              captions: Mapping[str, str] | None = None, title: str | None = None) -> Explorer:
    """Embedding explorer: a 2-D t-SNE map (:func:`zslib.analysis.viz.project_2d`) of ``classes`` unseen
    classes (``per_class`` images each), coloured by class; pointing at (or tapping) a dot shows its
    photograph. A menu switches between ``models`` (``{name: network or (n, d) embeddings}``); each map
    is computed when its model is first chosen (a few seconds) and once per model for the static page.

    ``dataset`` gives images and labels; without it give ``labels`` and ``images`` (a sequence). ``knob`` and
    ``kind`` name the control and make it a menu (``"select"``) or a slider over ordered models (``"slider"``);
    ``captions`` (``{name: text}``) are shown under each model's map; ``title`` replaces the default title.
    """
    if not models:
        raise ValueError("give at least one model: {name: network or embeddings}")
    if dataset is None and (labels is None or images is None):
        raise ValueError("give a dataset, or labels and images")
    y = _labels(dataset, labels)
    rng = np.random.default_rng(seed)
    chosen = np.sort(rng.choice(np.unique(y), size=min(classes, np.unique(y).size), replace=False))
    idx = np.concatenate([np.sort(rng.permutation(np.flatnonzero(y == c))[:per_class]) for c in chosen])
    source = dataset if dataset is not None else images
    pics = [jpeg_uri(_thumbnail(_image(source, i), thumb, mean, std), quality=70) for i in idx]
    palette = [mpl.colors.to_hex(c) for c in mpl.colormaps["tab10"].colors]
    computed: dict = {}

    def coords(name):
        if name not in computed:
            m = models[name]
            e = embeddings_of(m, dataset) if hasattr(m, "parameters") else embeddings_of(m, None)
            if e.shape[0] == y.size:
                e = e[idx]
            elif e.shape[0] != idx.size:
                raise ValueError(f"model {name!r}: {e.shape[0]} embeddings, expected {y.size} (all images) "
                                 f"or {idx.size} (the chosen ones)")
            xy = project_2d(e, "tsne", seed=seed, max_iter=max_iter, perplexity=min(30.0, (idx.size - 1) / 3))
            lo, hi = xy.min(0), xy.max(0)
            computed[name] = (xy - lo) / np.where(hi > lo, hi - lo, 1.0)
        return computed[name]

    def render(**values):
        model = values[knob]
        xy = coords(model)
        pad, side = 12, size
        dots = []
        for j, (p, i) in enumerate(zip(xy, idx)):
            cx, cy = pad + p[0] * (side - 2 * pad), pad + (1 - p[1]) * (side - 2 * pad)
            colour = palette[int(np.flatnonzero(chosen == y[i])[0]) % len(palette)]
            dots.append(f'<g class="zs-pt" tabindex="0"><circle cx="{cx:.1f}" cy="{cy:.1f}" r="5" fill="{colour}" '
                        f'stroke="#fff" stroke-width="0.8"><title>image {i}, class {y[i]}</title></circle>'
                        f'<image class="zs-photo" href="{pics[j]}" x="{side + 10}" y="20" width="{thumb * 2}" '
                        f'height="{thumb * 2}"/><text class="zs-photo" x="{side + 10}" y="14" font-size="12">'
                        f'image {i}, class {y[i]}</text></g>')
        svg = (f'<svg width="{side + 20 + thumb * 2}" height="{side}" '
               f'role="img" aria-label="t-SNE map, {html.escape(model)}">'
               f'<rect x="0" y="0" width="{side}" height="{side}" fill="#fafafa" stroke="#ddd"/>'
               f'<text x="{side + 10}" y="{thumb * 2 + 40}" font-size="11" fill="#777">point at a dot</text>'
               + "".join(dots) + "</svg>")
        caption = (captions or {}).get(model, "")
        if caption:
            svg += f'<div style="font-size:90%;margin-top:4px">{html.escape(caption)}</div>'
        return Frame(svg, {"model": model, "coords": xy.tolist(), "images": idx.tolist(), "caption": caption})

    control = Control(knob, list(models), kind)
    style = ("#__ID__ .zs-pt .zs-photo{display:none} #__ID__ .zs-pt:hover .zs-photo,"
             "#__ID__ .zs-pt:focus .zs-photo{display:inline} #__ID__ .zs-pt:hover circle{stroke:#000;stroke-width:2}")
    return Explorer(title or f"t-SNE of {chosen.size} unseen classes ({idx.size} images), coloured by class", [control],
                    render, note="Point at a dot (or tap it) to see its photograph; the menu switches models. "
                                 "t-SNE keeps neighbourhoods, not distances between clusters.", style=style)
