"""Measured demo: how well DeML's random-walk object attention finds the SynthParts bird.

For the quick profile's backbone (SmallCNN, widths 16-128), untrained and after a short triplet
training (``--steps``, default 200, ``zslib.engine.train.train`` with the quick profile's optimizer), at 48 px
(maps 6 x 6 and 3 x 3) and 96 px (12 x 12 and 6 x 6), on the unseen classes, this prints
:func:`zslib.analysis.localization.localization_scores` for:

* the layers ``stage3``, ``stage4`` and both (averaged), T = 10 (the paper's OAM);
* the number of steps: T = 1, 2, 10 and the exact stationary distribution;
* the released code's spatial Gaussian (``spatial_sigma=0.15``) and the ``uniform`` rescaling;
* the literal reading of Eq. 3 (nothing moves: uniform attention, no crop);
* the channel-averaged activation of the same layers (CML's saliency map) as a reference that uses no walk.

Scores: the share of attention mass on the object (``mass``; chance = the object's area share),
its ratio to chance (``lift``), the share of maps whose maximum is on the object (``peak``) and the IoU of
the crop box with the object box for the three region choices of ``attention_boxes`` (largest region,
region of the peak, all pixels above the mean; chance = the whole-image box). The T = 10 gap to the
stationary distribution (total variation) is printed per layer.

    python benchmarks/oam_localization.py                 # minutes on 2 cores (training at 96 px dominates)
    python benchmarks/oam_localization.py --steps 0       # untrained only
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from zslib.methods.deml.attention_crop import attention_boxes
from zslib.engine.data import SynthParts, build_dataset
from zslib.analysis.localization import localization_scores
from zslib.engine.losses import get_loss
from zslib.engine.models import build_model, normalization
from zslib.methods.deml.object_attention import convergence_gap, object_attention_map
from zslib.engine.profile import PROFILES
from zslib.engine.train import metric_objective, TrainSpec, train

LAYERS = ("stage3", "stage4")


def variants():
    """(label, layers, options) of the object-attention settings compared."""
    both = list(LAYERS)
    return [
        ("T=10 stage3", ["stage3"], {}),
        ("T=10 stage4", ["stage4"], {}),
        ("T=10 both", both, {}),
        ("T=1 both", both, {"steps": 1}),
        ("T=2 both", both, {"steps": 2}),
        ("exact pi both", both, {"steps": None}),
        ("T=10 both gauss", both, {"spatial_sigma": 0.15}),
        ("T=10 both unif", both, {"rescale": "uniform"}),
        ("literal T=10", both, {"reading": "literal"}),
        ("channel mean", both, "channel_mean"),
    ]


def channel_mean_map(maps, size):
    """CML's saliency: the channel mean of each layer, min-max scaled, resized, averaged over layers."""
    out = 0
    for m in maps:
        a = m.mean(1)
        lo = a.flatten(1).min(1).values[:, None, None]
        hi = a.flatten(1).max(1).values[:, None, None]
        a = (a - lo) / (hi - lo).clamp_min(1e-12)
        out = out + torch.nn.functional.interpolate(a[:, None], size=size, mode="bilinear", align_corners=False)[:, 0]
    return out / len(maps)


def score(model, size: int, images_per_class: int) -> list[dict]:
    ds = SynthParts("unseen", image_size=size, images_per_class=images_per_class)
    x, _ = ds.tensors()
    mean, std = (torch.tensor(v)[:, None, None] for v in normalization("smallcnn"))
    model.eval()
    with torch.no_grad():
        feats = model.features((x - mean) / std, list(LAYERS))
    masks, obj = ds.object_masks(), ds.boxes
    rows = []
    for label, layers, opts in variants():
        maps = [feats[n] for n in layers]
        att = channel_mean_map(maps, size) if opts == "channel_mean" else object_attention_map(maps, size, **opts)
        row = {"variant": label}
        for comp in ("largest", "peak", "all"):
            s = localization_scores(att, masks, obj, boxes=attention_boxes(att, component=comp))
            row[f"iou_{comp}"] = s["box_iou"]
        row.update({k: s[k] for k in ("mass_on_object", "lift", "peak_on_object", "area_share", "box_iou_full_image")})
        rows.append(row)
    gaps = {f"gap_T10_{n}": float(convergence_gap(feats[n], 10).max()) for n in LAYERS}
    gaps.update({f"gap_T10_{n}_gauss": float(convergence_gap(feats[n], 10, spatial_sigma=0.15).max()) for n in LAYERS})
    shapes = {n: tuple(feats[n].shape[1:]) for n in LAYERS}
    return rows, gaps, shapes


def trained_model(size: int, steps: int, seed: int = 0):
    profile = PROFILES["quick"].replace(image_size=size, resize_size=size)
    torch.manual_seed(seed)
    model = build_model("smallcnn", profile.embedding_dim, **profile.backbone_params)
    if steps:
        mean, std = normalization("smallcnn")
        data = build_dataset(profile, "train", mean=mean, std=std)
        train(model, metric_objective(get_loss("triplet")), data,
              TrainSpec(iterations=steps, batch_classes=profile.batch_classes,
                        batch_per_class=profile.batch_per_class, lr=profile.lr, new_layer_mult=profile.new_layer_mult,
                        weight_decay=profile.weight_decay, eval_at_start=False, eval_at_end=False, progress=False,
                        seed=seed))
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[48, 96])
    parser.add_argument("--steps", type=int, default=200, help="triplet training steps (0: untrained only)")
    parser.add_argument("--images-per-class", type=int, default=4)
    parser.add_argument("--out", default=None, help="write the numbers to this JSON file")
    args = parser.parse_args(argv)
    results = []
    for size in args.sizes:
        for steps in sorted({0, args.steps}):
            t0 = time.perf_counter()
            model = trained_model(size, steps)
            rows, gaps, shapes = score(model, size, args.images_per_class)
            results.append({"size": size, "train_steps": steps, "rows": rows, "gaps": gaps})
            print(f"\n{size} px, {'untrained' if not steps else f'{steps} triplet steps'}; maps {shapes}; "
                  f"object area {rows[0]['area_share']:.3f}, whole-image box IoU {rows[0]['box_iou_full_image']:.3f} "
                  f"({time.perf_counter() - t0:.0f} s)")
            print("T=10 gap to stationary (max TV): " + ", ".join(f"{k[8:]} {v:.1e}" for k, v in gaps.items()))
            head = ("variant", "mass", "lift", "peak", "IoU lrg", "IoU pk", "IoU all")
            print("{:17s} {:>6s} {:>5s} {:>5s} {:>7s} {:>6s} {:>7s}".format(*head))
            for r in rows:
                print(f"{r['variant']:17s} {r['mass_on_object']:6.3f} {r['lift']:5.2f} {r['peak_on_object']:5.2f} "
                      f"{r['iou_largest']:7.3f} {r['iou_peak']:6.3f} {r['iou_all']:7.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    main()
