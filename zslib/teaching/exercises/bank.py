"""The exercises of the chapters before the papers, chapter by chapter: each one's reference (a zslib function the
chapter teaches), its generated inputs and its hint. The chapters number them "Exercise <chapter>.<n>" in this order.
Each paper's exercises are in its own bank (``bank_<paper>.py``), the comparison's in ``bank_compare.py``.

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import math

import torch

from zslib.engine import evaluate as ev
from zslib.engine import losses
from zslib.methods.jrd import intra
from zslib.engine.profile import PROFILES
from zslib.teaching.exercises.kinds import Case, FunctionExercise, NumberExercise, PredictionExercise, ReasoningExercise

# ----------------------------------------------------------------------------------------------------
# Generated inputs


def _batch(classes, per_class, dim, seed, scale=1.0, shuffle=True):
    g = torch.Generator().manual_seed(seed)
    labels = torch.arange(classes).repeat_interleave(per_class)
    if shuffle:
        labels = labels[torch.randperm(labels.numel(), generator=g)]
    x = scale * torch.randn(labels.numel(), dim, generator=g, dtype=torch.float64)
    return x, labels


def _labelled_cases():
    out = []
    for desc, (p, k, d, seed, scale) in {
        "3 classes x 2 samples, 4 dimensions": (3, 2, 4, 1, 1.0),
        "4 classes x 3 samples, 5 dimensions, shuffled labels": (4, 3, 5, 2, 1.0),
        "2 classes x 4 samples, 3 dimensions, features 5 times larger": (2, 4, 3, 3, 5.0),
    }.items():
        x, y = _batch(p, k, d, seed, scale)
        out.append(Case(desc, (x, y)))
    return out


def _retrieval_cases():
    out = []
    for desc, (p, k, d, seed) in {"6 classes x 3 samples, 4 dimensions": (6, 3, 4, 21),
                                  "4 classes x 5 samples, 2 dimensions": (4, 5, 2, 22),
                                  "10 classes x 2 samples, 8 dimensions": (10, 2, 8, 23)}.items():
        x, y = _batch(p, k, d, seed)
        out.append(Case(desc, (x, y), grad=None))
    return out


def _proxy_cases():
    out = []
    for desc, (p, k, d, seed) in {"3 classes x 2 samples, 4 dimensions": (3, 2, 4, 31),
                                  "5 classes x 2 samples, 3 dimensions": (5, 2, 3, 32)}.items():
        x, y = _batch(p, k, d, seed)
        proxies = torch.randn(p, d, generator=torch.Generator().manual_seed(seed + 100), dtype=torch.float64)
        out.append(Case(desc, (x, y, proxies)))
    return out


def _clustering_cases():
    g = torch.Generator().manual_seed(41)
    out = []
    for desc, n, c, k in [("12 samples, 3 classes, 3 clusters", 12, 3, 3), ("20 samples, 4 classes, 6 clusters", 20, 4, 6),
                          ("9 samples, 3 classes, 1 cluster", 9, 3, 1)]:
        labels = torch.arange(c).repeat(math.ceil(n / c))[:n]
        clusters = torch.randint(0, k, (n,), generator=g)
        out.append(Case(desc, (labels, clusters), grad=None))
    return out


# ----------------------------------------------------------------------------------------------------
# References written as the exercise states them (thin wrappers around the zslib functions)


def _recall_at_1(x, labels):
    return ev.recall_at_k(x, labels, ks=(1,))[1]


def _map_at_r(x, labels):
    return ev.map_at_r(x, labels)


def _pair_counts(labels):
    pos, neg = losses.pair_masks(labels)
    return torch.tensor([int(pos.sum()), int(neg.sum())], dtype=torch.float64)


def _pair_count_cases():
    return [Case(desc, (_batch(p, k, 1, seed)[1],), grad=None)
            for desc, (p, k, seed) in {"4 classes x 2 images": (4, 2, 51), "3 classes x 5 images": (3, 5, 52),
                                       "8 classes x 4 images": (8, 4, 53)}.items()]


def _purity(labels, clusters):
    return ev.purity(None, labels.numpy(), assignments=clusters.numpy())


def _contrastive(x, labels):
    return losses.contrastive_loss(x, labels)


def _triplet(x, labels):
    return losses.triplet_margin_loss(x, labels)


def _binomial(x, labels):
    return losses.binomial_deviance_loss(x, labels)


def _proxy_nca(x, labels, proxies):
    return losses.proxy_nca_loss(x, labels, proxies)


# ----------------------------------------------------------------------------------------------------
# Small helpers of the references


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


EXERCISES = [
    # -- how_to_use
    NumberExercise("how_to_use.batch_size", "images in one batch of the quick profile",
                   "A batch holds P classes of K images each; read both from the printed profile.",
                   expected=lambda: PROFILES["quick"].batch_classes * PROFILES["quick"].batch_per_class, tol=0.5),
    NumberExercise("how_to_use.iteration_factor", "full-profile iterations per quick-profile iteration",
                   "Divide the `iterations` of the full profile by those of the quick one (a ratio, not a difference).",
                   expected=lambda: PROFILES["full"].iterations / PROFILES["quick"].iterations, tol=0.01, relative=True),
    ReasoningExercise("how_to_use.variant_leaves_profile", "does a profile variant change the active profile?",
                      "`replace` builds a new profile object and returns it; nothing in it assigns to the active "
                      "profile. Compare `zslib.get_profile()` before and after.",
                      options=("changed", "unchanged"), answer="unchanged"),
    # -- zero_shot_problem
    FunctionExercise("zero_shot_problem.recall_at_1", "Recall@1 by brute force",
                     "For each query, find the nearest *other* sample by cosine similarity (exclude the query "
                     "itself, e.g. by setting the diagonal of the similarity matrix to -inf) and count a hit when "
                     "its label equals the query's; Recall@1 is the fraction of hits.",
                     reference=_recall_at_1, cases=_retrieval_cases, forbidden=(ev.recall_at_k,)),
    NumberExercise("zero_shot_problem.unit_distance", "Euclidean distance of two unit vectors at cosine 0.6",
                   "For unit vectors, ||a - b||^2 = ||a||^2 + ||b||^2 - 2 a.b = 2 - 2 cos; take the square root.",
                   expected=lambda: math.sqrt(2 - 2 * 0.6), tol=1e-3),
    ReasoningExercise("zero_shot_problem.tuning_classes", "on which classes to score the candidates of a setting",
                      "The unseen classes may decide nothing before the final numbers (a choice made on them makes "
                      "their score optimistic), and the classes the network trained on say how well it fits, not "
                      "how it carries over to classes it never saw.",
                      options=("training classes", "held-out seen classes", "unseen classes"),
                      answer="held-out seen classes"),
    # -- datasets
    FunctionExercise("datasets.pair_counts", "ordered positive and negative pairs of a batch",
                     "A positive pair is (i, j) with i != j and the same label; a negative pair has different "
                     "labels. Count ordered pairs (both (i, j) and (j, i)); compare labels[:, None] with "
                     "labels[None, :] and remove the diagonal from the positives.",
                     reference=_pair_counts, cases=_pair_count_cases, forbidden=(losses.pair_masks,)),
    NumberExercise("datasets.negatives_per_positive", "negative pairs per positive pair in a quick-profile batch",
                   "Each image has K - 1 positives and (P - 1) K negatives; the ratio of the pair counts is the "
                   "ratio of these two.",
                   expected=lambda: ((PROFILES["quick"].batch_classes - 1) * PROFILES["quick"].batch_per_class
                                     / (PROFILES["quick"].batch_per_class - 1)), tol=0.01, relative=True),
    ReasoningExercise("datasets.shortcut_split", "on which split can the colour shortcut separate more classes?",
                      "Every seen class has a colour pair of its own; the unseen classes reuse colour pairs in groups. "
                      "What can a classifier that sees only the two colours tell apart within a group?",
                      options=("seen", "unseen", "both equally"), answer="seen"),
    # -- metrics
    FunctionExercise("metrics.map_at_r", "MAP@R by brute force",
                     "For a query with R relatives, rank the other samples by cosine similarity, keep the first R, "
                     "and average the precision at each rank i where the i-th neighbour is a relative, dividing "
                     "by R (not by the number of hits).",
                     reference=_map_at_r, cases=_retrieval_cases, forbidden=(ev.map_at_r,)),
    FunctionExercise("metrics.purity", "purity of a clustering",
                     "For each cluster, count the samples of its most frequent class; purity is the sum of these "
                     "counts over the clusters divided by the number of samples.",
                     reference=_purity, cases=_clustering_cases, forbidden=(ev.purity,)),
    NumberExercise("metrics.duplicated_r1", "Recall@1 when every test image appears twice",
                   "The duplicate of a query is at distance 0 and carries the query's label.",
                   expected=lambda: 1.0, tol=1e-6),
    ReasoningExercise("metrics.singleton_clusters", "which score a clustering of one point per cluster games",
                      "Put every point in a cluster of its own. Purity asks only that each cluster's majority "
                      "dominate it; NMI = 2 I(Y; C) / (H(Y) + H(C)) also pays H(C), which grows with the number of "
                      "clusters.",
                      options=("purity", "nmi", "both"), answer="purity"),
    # -- deep_metric_learning
    FunctionExercise("deep_metric_learning.contrastive", "the contrastive loss",
                     "L2-normalize the rows, take Euclidean distances d_ij; positive pairs (same label, i != j) "
                     "cost d_ij, negative pairs cost max(0, 1 - d_ij); average the positive terms and the "
                     "negative terms separately, then add the two means.",
                     reference=_contrastive, cases=_labelled_cases, forbidden=(losses.contrastive_loss,)),
    FunctionExercise("deep_metric_learning.triplet", "the triplet loss over all triplets",
                     "L2-normalize, use *squared* Euclidean distances, and average max(0, d(a,p) - d(a,n) + 0.1) "
                     "over every valid triplet (a, p same label, a != p; n of another label), zero terms included.",
                     reference=_triplet, cases=_labelled_cases, forbidden=(losses.triplet_margin_loss,)),
    NumberExercise("deep_metric_learning.proxy_nca_floor", "smallest Proxy-NCA loss at scale 1 with 50 classes",
                   "On unit vectors the squared distance lies in [0, 4]; the loss is smallest with the positive "
                   "proxy at distance 0 and all 49 others at distance 4 (the positive stays in the denominator).",
                   expected=lambda: math.log(1 + 49 * math.exp(-4)), tol=1e-3),
    ReasoningExercise("deep_metric_learning.unnormalized_norms",
                      "contrastive loss without normalization, negatives inside the margin: what do the norms do?",
                      "The gradient of max(0, 1 - d_ij) moves x_i straight away from every negative x_j inside the "
                      "margin; from a small start around the origin, what does moving away from many directions at "
                      "once do to a vector's length?",
                      options=("grow", "shrink", "stay"), answer="grow"),
    # -- deep_metric_learning_compare
    FunctionExercise("deep_metric_learning_compare.binomial", "the binomial deviance loss (CML Eq. 14)",
                     "Cosine similarities D_ij over ordered pairs i != j; a positive pair costs "
                     "softplus(-2 (D_ij - 0.5)), a negative pair softplus(2 * 25 (D_ij - 0.5)); sum all terms.",
                     reference=_binomial, cases=_labelled_cases, forbidden=(losses.binomial_deviance_loss,)),
    NumberExercise("deep_metric_learning_compare.negative_share", "share of negative pairs in a quick-profile batch",
                   "Of the K P - 1 other images of a batch, (P - 1) K have another class.",
                   expected=lambda: ((PROFILES["quick"].batch_classes - 1) * PROFILES["quick"].batch_per_class
                                     / (PROFILES["quick"].batch_classes * PROFILES["quick"].batch_per_class - 1)),
                   tol=1e-3),
    NumberExercise("deep_metric_learning_compare.hard_negatives",
                   "how many times harder a negative pair at cosine 0.6 pulls than one at 0.3 (binomial deviance)",
                   "A negative term is softplus(2 * 25 (D - 0.5)); its derivative is 50 * sigmoid(50 (D - 0.5)). "
                   "Take the ratio of the two derivatives (the 50 cancels).",
                   expected=lambda: _sigmoid(50 * 0.1) / _sigmoid(50 * -0.2), tol=0.01, relative=True),
    # -- deep_metric_learning_compare_proxies
    FunctionExercise("deep_metric_learning_compare_proxies.proxy_nca", "the Proxy-NCA loss",
                     "Normalize embeddings and proxies, take squared distances d to every proxy, and average "
                     "-log softmax(-d) at the true class (the positive proxy stays in the denominator).",
                     reference=_proxy_nca, cases=_proxy_cases, forbidden=(losses.proxy_nca_loss,)),
    NumberExercise("deep_metric_learning_compare_proxies.positive_gradient",
                   "|dL/dD| of one positive pair's binomial-deviance term at similarity 0",
                   "The positive term is softplus(-alpha (D - beta)) with alpha = 2, beta = 0.5; its derivative is "
                   "-alpha * sigmoid(-alpha (D - beta)).",
                   expected=lambda: 2 / (1 + math.exp(-1.0)), tol=1e-3),
    PredictionExercise("deep_metric_learning_compare_proxies.deviance_fit",
                       "which fits the seen classes better, binomial_deviance or binomial_deml, or can the seeds not "
                       "tell?",
                       "Read the 95% interval of the paired difference binomial_deviance minus binomial_deml in seen "
                       "Recall@1, seed by seed: 'binomial_deviance' only if it lies above 0, 'binomial_deml' only if "
                       "below, otherwise 'no clear effect'.",
                       options=("binomial_deviance", "binomial_deml", "no clear effect")),
    # -- generalization_gap
    FunctionExercise("generalization_gap.intra_class_distance", "JRD's intra-class distance penalty (Eq. 4)",
                     "For each class with two or more samples, average (1/2)||x_i - x_j||^2 over its distinct "
                     "pairs {i, j}; then average over those classes.",
                     reference=lambda x, labels: intra.intra_class_distance(x, labels),
                     cases=_labelled_cases, forbidden=(intra.intra_class_distance,)),
    NumberExercise("generalization_gap.triangle_penalty", "the penalty of one class {(0,0), (2,0), (0,2)}",
                   "Three pairs: their squared distances are 4, 4 and 8; halve each and average.",
                   expected=lambda: float(intra.intra_class_distance(
                       torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]], dtype=torch.float64),
                       torch.zeros(3, dtype=torch.long))),
                   tol=1e-6),
    NumberExercise("generalization_gap.penalty_step",
                   "the distance of a two-point class after one gradient step on alpha times the penalty",
                   "For one class {x_1, x_2} the penalty is (1/2)||x_1 - x_2||^2, whose gradient in x_1 is x_1 - x_2. "
                   "A step of size lr on alpha times it moves both points, so x_1 - x_2 is multiplied by 1 - 2 lr "
                   "alpha.",
                   expected=lambda: 2.0 * (1 - 2 * 0.4 * 0.5), tol=1e-3),
]
