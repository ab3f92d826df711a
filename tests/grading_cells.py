"""Cells of the small notebooks the grading tests hand to the grader (tests/test_grading_class.py,
tests/test_grading_hostile.py)."""

IMPORT = "from zslib.teaching.exercises import check"
PURITY = ("def purity(labels, clusters):\n    return sum(max(int(((clusters == c) & (labels == k)).sum())"
          " for k in labels.unique()) for c in clusters.unique()) / len(labels)\ncheck('metrics.purity', purity)")
# an experiment computed in the notebook (the norms of unnormalized contrastive training, over three seeds), whose
# paired interval decides a prediction: the grader's own run of the key computes it, whatever a submission hands over
NORMS = ("import torch\nfrom zslib.engine import losses\nfrom zslib.engine.stats import interval\ngrowth = []\n"
         "for seed in range(3):\n    torch.manual_seed(seed)\n    free = (0.1 * torch.randn(32, 8)).requires_grad_()\n"
         "    free_labels = torch.arange(8).repeat_interleave(4)\n    sgd = torch.optim.SGD([free], lr=0.5)\n"
         "    before = free.norm(dim=1).mean().item()\n    for _ in range(50):\n"
         "        step = losses.contrastive_loss(free, free_labels, normalize=False)\n"
         "        sgd.zero_grad()\n        step.backward()\n        sgd.step()\n"
         "    growth.append(free.norm(dim=1).mean().item() - before)\neffect = tuple(interval(growth))[:3]")
PREDICTION = "cml_experiments.unseen_diversity"  # a prediction: up, down or no clear effect, from `interval`


def notebook(cells, chapter="tiny") -> dict:
    """A notebook of code ``cells`` whose assignment metadata names ``chapter``."""
    return {"cells": [{"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None,
                       "id": f"c{i}"} for i, c in enumerate(cells)],
            "metadata": {"zslib_assignment": {"chapter": chapter}, "kernelspec": {
                "name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
