"""The CML chapter's figure at the derivation: what each confusion term does to two classes, drawn from the library's
own terms (:func:`zslib.methods.cml.confusion.energy_confusion`, :func:`~zslib.methods.cml.confusion.diversity_confusion`)."""
from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd
import torch

from zslib.methods.cml import confusion as R
from zslib.present.base import Section

__all__ = ["two_gaussians", "descend", "confusion_figure"]


def two_gaussians(n: int = 40, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Two Gaussian classes of ``n`` points each in 2-D (float64): class 0 around (-2, 1), elongated along x;
    class 1 around (2, -0.5), elongated along y. Returns ``(x, labels)``."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(2 * n, 2, generator=gen, dtype=torch.float64)
    scale = torch.tensor([[1.0, 0.4]] * n + [[0.4, 0.9]] * n, dtype=torch.float64)
    centre = torch.tensor([[-2.0, 1.0]] * n + [[2.0, -0.5]] * n, dtype=torch.float64)
    return z * scale + centre, torch.tensor([0] * n + [1] * n)


def descend(x: torch.Tensor, term, steps: int, rate: float) -> torch.Tensor:
    """``steps`` plain gradient steps on ``term(x)`` over the points ``x`` themselves (as if a network could place
    every feature freely), with a step size of ``rate * len(x)`` so that the rate does not depend on the count."""
    x = x.clone().requires_grad_(True)
    for _ in range(steps):
        (grad,) = torch.autograd.grad(term(x), x)
        with torch.no_grad():
            x -= rate * len(x) * grad
    return x.detach()


def _numbers(x: torch.Tensor, labels: torch.Tensor) -> dict:
    xi, xj = x[labels == 0], x[labels == 1]
    return {"‖μ_I − μ_J‖²": float((xi.mean(0) - xj.mean(0)).pow(2).sum()),
            "tr Σ_I + tr Σ_J": float(R.diversity(xi) + R.diversity(xj)),
            "EC (Eq. 3)": float(R.energy_confusion(x, labels, pairs="all")),
            "v = mean ‖x‖² (Eq. 10)": float(R.diversity_confusion(x))}


def confusion_figure(steps: int = 5, rate: float = 0.02, seed: int = 0) -> Section:
    """Two Gaussian classes in 2-D, then the same points after ``steps`` gradient steps on the energy confusion alone
    and on the diversity confusion alone (:func:`descend`), with the decomposition
    ``EC = ‖μ_I − μ_J‖² + tr Σ_I + tr Σ_J`` of each panel in the table; its last column is DC."""
    x, labels = two_gaussians(seed=seed)
    panels = {"before": x,
              "after minimizing EC": descend(x, lambda p: R.energy_confusion(p, labels, pairs="all"), steps, rate),
              "after minimizing DC": descend(x, R.diversity_confusion, steps, rate)}
    fig, axes = plt.subplots(1, 3, figsize=(10, 3.4), sharex=True, sharey=True)
    for ax, (name, points) in zip(axes, panels.items()):
        for c, colour in ((0, "tab:blue"), (1, "tab:orange")):
            p = points[labels == c].numpy()
            ax.scatter(p[:, 0], p[:, 1], s=10, color=colour, alpha=0.6, label=f"class {'IJ'[c]}")
            ax.plot(*p.mean(0), marker="X", markersize=11, color=colour, markeredgecolor="k")
        ax.plot(0, 0, marker="+", color="k", markersize=12)
        ax.set_title(name)
        ax.set_aspect("equal")
    axes[0].legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    table = pd.DataFrame({name: _numbers(points, labels) for name, points in panels.items()}).T
    ec = table["EC (Eq. 3)"]
    assert ((table["‖μ_I − μ_J‖²"] + table["tr Σ_I + tr Σ_J"] - ec).abs() < 1e-9 * (1 + ec)).all()
    before, after_ec, after_dc = (table.loc[name] for name in panels)
    assert after_ec.iloc[0] < before.iloc[0] and after_ec.iloc[1] < before.iloc[1]  # what the notes say
    assert after_dc.iloc[3] < before.iloc[3] and after_dc.iloc[0] < before.iloc[0]

    def change(row, column):
        return f"{column} from {before[column]:.2f} to {row[column]:.2f}"

    return Section(figure=fig, table=table.round(3), notes=[
        "Crosses: the class means; +: the origin. In every row the first two columns add up to EC. "
        f"{steps} gradient steps on EC alone took {change(after_ec, '‖μ_I − μ_J‖²')} and "
        f"{change(after_ec, 'tr Σ_I + tr Σ_J')}: EC pulls the classes together and shrinks each of them. "
        f"The same steps on DC alone took {change(after_dc, 'v = mean ‖x‖² (Eq. 10)')}, "
        f"{change(after_dc, '‖μ_I − μ_J‖²')} and {change(after_dc, 'tr Σ_I + tr Σ_J')}: DC contracts the whole "
        "cloud towards the origin, and the distance between the classes with it."])
