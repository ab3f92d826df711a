"""How large is JRD's regularizer, at initialization and after AM-Softmax training? (quick profile)

Trains the quick profile's SmallCNN with AM-Softmax (s = 20, m = 0.1, JRD Sec. 5.1) plus alpha times the
JRS regularizer (alpha = 0: AM-Softmax alone) and records, on every training batch, the values of the
JRS regularizer of JRD and its variants, of JMMD and JIntra (all with alpha = 1), and at a few steps the
gradient norms of the AM-Softmax term and of the JRS term with respect to the network's parameters.
It writes a JSON summary and prints a table; the numbers help choose an alpha range for the JRD chapter.

    PYTHONPATH=$PWD python scripts/jrd_regularizer_magnitude.py [--steps 600] [--alphas 0 1] [--out FILE]

Not part of zslib: the objective here is a measurement device, not the JRD method.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from torch import nn

from zslib.methods.jrd import diversification as D
from zslib.experiment import Config, build_data, build_model
from zslib.engine.losses import AMSoftmax
from zslib.engine.train import set_seed, TrainSpec, train

REPORT_STEPS = (0, 25, 50, 100, 200, 300, 400, 600, 800, 1000)


class Monitored(nn.Module):
    """AM-Softmax + alpha * JRS, logging every regularizer's batch value (and gradient norms)."""

    def __init__(self, num_classes, dim, alpha, classes, last_step):
        super().__init__()
        self.report = set(REPORT_STEPS) | {last_step}
        self.loss = AMSoftmax(num_classes, dim, scale=20.0, margin=0.1)
        self.alpha = float(alpha)
        lookup = torch.full((int(classes.max()) + 1,), -1, dtype=torch.long)
        lookup[torch.from_numpy(classes)] = torch.arange(len(classes))
        self.register_buffer("lookup", lookup, persistent=False)
        self.log: list[dict] = []
        self.step = 0

    def forward(self, model, images, labels):
        labels = self.lookup[labels]
        maps = model.features(images, ["pool", "embedding"])
        pooled, emb = maps["pool"].flatten(1), maps["embedding"]
        ams = self.loss(emb, labels)
        row = {"step": self.step, "am_softmax": ams.item()}
        jrs_term = None
        for variant in D.VARIANTS:
            r = D.jrd_representations(pooled, emb, self.loss.weight, variant)
            value = D.jrs_regularizer(r.layers, labels, r.kernels, r.combine)
            row[f"jrs_{variant}"] = value.item()
            if variant == "jrd":
                jrs_term = value
                row["jmmd"] = D.jmmd_regularizer(r.layers, labels, r.kernels).item()
                row["jintra"] = D.jintra_regularizer(r.layers, labels, r.kernels).item()
                row["tau"] = [D.bandwidth(x).item() for x in r.layers]
        if self.step in self.report:
            params = [p for p in model.parameters() if p.requires_grad]
            g_ams = torch.autograd.grad(ams, params, retain_graph=True, allow_unused=True)
            g_jrs = torch.autograd.grad(jrs_term, params, retain_graph=True, allow_unused=True)

            def norm(gs):
                return float(torch.sqrt(sum((g.float() ** 2).sum() for g in gs if g is not None)))

            row["grad_am_softmax"], row["grad_jrs"] = norm(g_ams), norm(g_jrs)
        self.log.append(row)
        self.step += 1
        terms = {"am_softmax": ams}
        if self.alpha > 0:
            terms["jrs"] = self.alpha * jrs_term
        return terms


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.0, 1.0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="write the per-step log as JSON here")
    args = parser.parse_args()

    torch.set_num_threads(1)
    config = Config.from_profile("quick", loss="am_softmax", seed=args.seed, iterations=args.steps)
    data = build_data(config)
    classes = np.unique(np.asarray(data["train"].labels))
    logs = {}
    for alpha in args.alphas:
        set_seed(config.seed)
        model = build_model(config)
        objective = Monitored(len(classes), config.embedding_dim, alpha, classes, config.iterations - 1)
        t0 = time.perf_counter()
        train(model, objective, data["train"], TrainSpec(iterations=config.iterations,
                                                         batch_classes=config.batch_classes,
                                                         batch_per_class=config.batch_per_class, lr=config.lr,
                                                         weight_decay=config.weight_decay,
                                                         new_layer_mult=config.new_layer_mult, objective_lr=1e-2,
                                                         seed=config.seed, device="cpu", progress=False))
        print(f"alpha={alpha:g}: {config.iterations} steps in {time.perf_counter() - t0:.1f} s")
        logs[alpha] = objective.log

    keys = ["am_softmax", *[f"jrs_{v}" for v in D.VARIANTS], "jmmd", "jintra"]
    for alpha, log in logs.items():
        print(f"\nalpha = {alpha:g} (batch values; 'mean' = mean over the 25 steps ending at that step)")
        print(f"{'step':>5s} " + " ".join(f"{k:>15s}" for k in keys) + f" {'|g_AMS|':>8s} {'|g_JRS|':>8s}  tau(p, e, c)")
        for row in log:
            if "grad_jrs" not in row:
                continue
            window = [r for r in log if row["step"] - 24 <= r["step"] <= row["step"]]
            cells = [f"{row[k]:7.4f}/{np.mean([r[k] for r in window]):7.4f}" for k in keys]
            print(f"{row['step']:5d} " + " ".join(cells)
                  + f" {row['grad_am_softmax']:8.4f} {row['grad_jrs']:8.4f}  "
                  + ", ".join(f"{t:.3g}" for t in row["tau"]))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({str(a): log for a, log in logs.items()}, f)


if __name__ == "__main__":
    main()
