"""ZSML analyses of a trained model (Xu et al., IJCAI 2019): ``every_pair`` scores every ordered pair of the unseen
images (Sec. 5.1's protocol on the whole split, not a sample), ``to_synthparts`` / ``to_flowers102`` the
inter-dataset transfer of Sec. 5.2. Recorded beside a run by :func:`zslib.analysis.records.analyze`;
:func:`recorded_every_pair` and :func:`recorded_transfer` read the records back for the chapter.
:func:`fig5_pairs` reads Fig. 5's pairs from a run's checkpoint.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from zslib.analysis.records import Analysis, recorded_analyses, register_analysis
from zslib.engine.config import Config
from zslib.engine.evaluate import evaluate
from zslib.engine.memory import peak_rss_mib, reset_peak_rss
from zslib.engine.registry import get_method
from zslib.engine.runner import build_data, load_model
from zslib.engine.train import embed, load_checkpoint
from zslib.methods.zsml.method import ZSML
from zslib.methods.zsml.pairwise import euclidean_scorer, matrix_metrics, score_matrix

__all__ = ["every_pair", "transfer", "recorded_every_pair", "recorded_transfer", "fig5_pairs"]


def every_pair(model, data: dict, config: Config, *, split: str = "unseen", max_pairs: int = 512,
               progress="text") -> dict[str, float]:
    """A pair scorer (ZSML, ``model.pair``) evaluated on *every* ordered pair of a split, not on the class-stratified
    sample of its run (``eval_per_class``): the book's protocol (:func:`zslib.methods.zsml.pairwise.matrix_metrics`: Recall@K,
    spectral clustering's ACC / NMI / purity) on the full ``(n, n)`` score matrix, with the Euclidean distance of the
    same features beside it (``input ...``). Also measured: ``seconds`` spent scoring, ``pairs``, ``n_images``,
    ``matrix_mib`` (the float32 matrix) and ``peak_rss_mib``, the process's peak resident memory while the pairs
    were scored (``peak_since_reset`` is 1 when the kernel counter could be reset before scoring, else the peak of
    the whole process, training included)."""
    pair = getattr(model, "pair", None)
    if pair is None or not callable(pair):
        raise TypeError(f"every_pair needs a model with a pair scorer .pair (ZSML's ZSMLNet); "
                        f"{config.method!r} embeds images, use the run's own metrics instead")
    if isinstance(data[split], tuple):
        raise NotImplementedError("every_pair scores one set against itself; In-Shop's query/gallery split is not supported")
    device = next(model.parameters()).device
    x, y = embed(model, data[split], batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers)
    x, y = torch.as_tensor(x), np.asarray(y.cpu() if torch.is_tensor(y) else y)
    p = config.method_params
    reset = reset_peak_rss()
    started = time.perf_counter()
    s = score_matrix(pair.eval(), x, max_pairs=max_pairs, device=device, progress=progress)
    seconds = time.perf_counter() - started
    peak = peak_rss_mib()
    if p.get("symmetric"):
        s = 0.5 * (s + s.T)
    seed = config.seed
    row = matrix_metrics(s.numpy(), y, neighbors=p.get("neighbors", 10), seed=seed)
    del s
    base = matrix_metrics(score_matrix(euclidean_scorer, x.cpu(), max_pairs=1 << 16).numpy(), y,
                          neighbors=p.get("neighbors", 10), seed=seed)
    n = len(y)
    return {**row, **{f"input {k}": v for k, v in base.items()}, "n_images": n, "pairs": n * n, "seconds": seconds,
            "matrix_mib": 4 * n * n / 2 ** 20, "peak_rss_mib": peak, "peak_since_reset": float(reset)}


def transfer(model, data: dict, config: Config, *, dataset: str, split: str = "unseen") -> dict[str, float]:
    """Inter-dataset transfer (ZSML, Xu et al. IJCAI 2019, Sec. 5.2 and Tables 4-5: a metric learned on one dataset,
    tested on another): the trained model evaluated on ``split`` of ``dataset`` the way its run evaluates its own
    unseen classes -- a pair scorer (ZSML) with its method's pair evaluator and the run's seed, an embedding with
    :func:`zslib.engine.evaluate.evaluate`. The model's input must mean the same on both datasets: on a cached-feature
    profile (``real``) both are read through the same frozen pretrained backbone, so the pooled features agree."""
    if dataset == config.dataset:
        raise ValueError(f"transfer to {dataset!r}: the run was trained on that dataset; its own metrics are the "
                         "intra-dataset result")
    target = build_data(config.replace(dataset=dataset, validation_fraction=0.0))
    if split not in target or isinstance(target[split], tuple):
        raise ValueError(f"transfer needs one set of images as split {split!r} of {dataset!r}; it has "
                         f"{sorted(k for k, v in target.items() if not isinstance(v, tuple))}")
    device = next(model.parameters()).device
    x, y = embed(model, target[split], batch_size=config.eval_batch_size, device=device, num_workers=config.num_workers)
    scorer = get_method(config.method)(config, model, 1).pair_evaluator(model)
    if scorer is not None:
        return scorer(x, y, seed=config.seed)
    return evaluate(x, y, dataset=dataset)


def recorded_every_pair(config: Config, seed: int = 0, *, train: bool = False):
    """The ``every_pair`` record of the run of ``config`` at ``seed``, or ``None`` (after a note) when it is not
    stored; with ``train`` a missing record (and its run) is made."""
    records = recorded_analyses({"ZSML": config}, "every_pair", "ZSML on every pair of the unseen images", seeds=(seed,),
                                train=train)
    return None if records is None else records["ZSML"][0]


def recorded_transfer(flowers: Config, synthparts: Config, seeds, *, train: bool = False):
    """The inter-dataset transfer records of Sec. 5.2, one per seed: ``to_synthparts`` of the Flowers-102 runs of
    ``flowers`` and ``to_flowers102`` of the SynthParts runs of ``synthparts``; ``None`` (after a note) when any is
    not stored. With ``train`` the missing ones (and their runs) are made."""
    to_synth = recorded_analyses({"Flowers-102": flowers}, "to_synthparts", "the Flowers-102 -> SynthParts transfer",
                                 seeds, train=train)
    to_flowers = recorded_analyses({"SynthParts": synthparts}, "to_flowers102", "the SynthParts -> Flowers-102 transfer",
                                   seeds, train=train)
    if to_synth is None or to_flowers is None:
        return None
    return to_synth["Flowers-102"], to_flowers["SynthParts"]


def fig5_pairs(run, count: int = 400) -> dict | None:
    """For Fig. 5 of the paper: the first ``count`` pairs of a stored ZSML run's pair set P with the trained
    network's similarity ``s``, their labels ``y`` now and at their Eq. 3 start (``y0``) and the positive flags
    (:meth:`zslib.methods.zsml.method.ZSML.pair_predictions`), rebuilt from the run's checkpoint (the model, the
    pair set and its labels); ``None`` when the run has no checkpoint here."""
    if run.checkpoint is None or not run.checkpoint.is_file():
        return None
    model = load_model(run, device="cpu")
    method = ZSML(run.config, model, 1)
    method.prepare(model, build_data(run.config)["train"])
    method.load_state_dict(load_checkpoint(run.checkpoint, map_location="cpu")["method"])
    return method.pair_predictions(model, count)


register_analysis(Analysis("every_pair", every_pair, {"split": "unseen", "max_pairs": 512}))
register_analysis(Analysis("to_synthparts", transfer, {"dataset": "synthparts", "split": "unseen"}))
register_analysis(Analysis("to_flowers102", transfer, {"dataset": "flowers102", "split": "unseen"}))
