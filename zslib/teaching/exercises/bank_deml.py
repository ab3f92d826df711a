"""The DeML chapter's checked exercises. The main page (book/deml.ipynb): activation decay (Eq. 6) written by
hand, the stationary mass of the object-attention walk on a toy map, the walk run step by step against its limit (an
experiment) and what it does on a two-valued map, and whether the adversary of Eq. 4 made this run's learners less
alike (decided by the paired interval). The experiments page (book/deml_experiments.ipynb): the centre share that scores the
object attention on photographs, the overlap of two random channel selections, and what the released code's
spatial Gaussian does to a map with no layout at all.

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import torch

from zslib.analysis.localization import central_mass, mass_on_object
from zslib.methods.deml.decoupled_losses import activation_decay, nontrivial_term
from zslib.methods.deml.object_attention import (dissimilarity_graph, object_attention, random_walk,
                                                  stationary_distribution, transition_matrix)
from zslib.teaching.exercises.kinds import (Case, ExperimentExercise, FunctionExercise, NumberExercise,
                                            PredictionExercise, ReasoningExercise)


def _decay_cases():
    """Learner outputs ``(L, N, d_l)`` and weight matrices ``(L, d_l, d_1)``; the gradient is compared with
    respect to the outputs in some cases and to the weights in others."""
    out = []
    for desc, (learners, n, d_l, d_1, seed, grad) in {
        "4 learners, 6 images, 3 units, weights 5 wide; gradient on the outputs": (4, 6, 3, 5, 61, 0),
        "2 learners, 5 images, 4 units, weights 3 wide; gradient on the weights": (2, 5, 4, 3, 62, 1),
        "1 learner, 8 images, 2 units, weights 6 wide; gradient on the weights": (1, 8, 2, 6, 63, 1),
    }.items():
        g = torch.Generator().manual_seed(seed)
        z = 2.0 * torch.randn(learners, n, d_l, generator=g, dtype=torch.float64)
        w = 0.6 * torch.randn(learners, d_l, d_1, generator=g, dtype=torch.float64)
        out.append(Case(desc, (z, w), grad=grad))
    return out


def _activation_decay(z, w):
    return activation_decay(z, w)  # the paper's lambda1 = 0.014, lambda2 = 0.25, Eq. 6 as printed


def toy_map(bird_values) -> torch.Tensor:
    """A one-channel 6 x 6 map: 32 background positions of value 0 and, in the middle, four bird
    positions with the given values (row-major over the 2 x 2 centre)."""
    fmap = torch.zeros(1, 1, 6, 6, dtype=torch.float64)
    fmap[0, 0, 2:4, 2:4] = torch.tensor(bird_values, dtype=torch.float64).reshape(2, 2)
    return fmap


def _bird_mass(bird_values) -> float:
    pi = object_attention(toy_map(bird_values), None)[0]  # the walk's limit, pi = degrees / total degree
    return float(pi[2:4, 2:4].sum())


def _walk_gaps(fmap, steps):
    """The L1 distance between the walk's mass after t = 1, ..., ``steps`` steps from the uniform map (DeML Eq. 3,
    mass moving along the edges) and its limit, the degree distribution: ``(B, steps)``."""
    weights = dissimilarity_graph(fmap)
    limit, transition = stationary_distribution(weights), transition_matrix(weights)
    mass = torch.full_like(limit, 1.0 / limit.shape[-1])
    gaps = []
    for _ in range(int(steps)):
        mass = random_walk(transition, 1, start=mass)
        gaps.append((mass - limit).abs().sum(-1))
    return torch.stack(gaps, -1)


def _walk_cases():
    """Random maps with a brighter block, and the toy of the stationary-mass exercise with two bird values."""
    out = []
    for desc, (b, c, h, w, seed) in {"2 maps of 3 channels, 5 x 5, 8 steps": (2, 3, 5, 5, 66),
                                      "1 map of 4 channels, 4 x 6, 12 steps": (1, 4, 4, 6, 67)}.items():
        g = torch.Generator().manual_seed(seed)
        fmap = torch.rand(b, c, h, w, generator=g, dtype=torch.float64)
        fmap[:, :, 1:3, 1:3] += 1.0
        out.append(Case(desc, (fmap, 8 if h == 5 else 12), grad=None))
    out.append(Case("the 6 x 6 toy map with bird values 1, 1, 2, 2; 10 steps", (toy_map([1.0, 1.0, 2.0, 2.0]), 10),
                    grad=None))
    return out


def _attention_cases():
    """Non-negative attention maps ``(B, H, W)``: square and odd-sized (the central box's side is rounded) and
    not square."""
    out = []
    for desc, (b, h, w, seed) in {"3 maps of 8 x 8": (3, 8, 8, 71), "2 maps of 7 x 7 (an odd side)": (2, 7, 7, 72),
                                   "1 map of 6 x 10 (not square)": (1, 6, 10, 73)}.items():
        g = torch.Generator().manual_seed(seed)
        out.append(Case(desc, (torch.rand(b, h, w, generator=g, dtype=torch.float64) ** 3,), grad=None))
    return out


def _random_overlap(top: int = 64, channels: int = 1280) -> float:
    """Two random sets of ``top`` of ``channels`` share top * top / channels members on average: their Jaccard
    overlap, intersection over union of those expectations, is top / (2 channels - top)."""
    return top / (2 * channels - top)




EXERCISES = [
    FunctionExercise("deml.activation_decay", "activation decay with its non-trivial term (DeML Eq. 6)",
                     "Eq. 6 with L = I J learners and N images: lambda1 / (2 L N) times the sum of all squared "
                     "outputs, plus lambda2 times the sum over every learner's weight rows w_k of "
                     "(||w_k||^2 - 1)^2 (the trace of a Hadamard square keeps only the diagonal of w w^T - I). "
                     "lambda1 = 0.014, lambda2 = 0.25.",
                     reference=_activation_decay, cases=_decay_cases, forbidden=(activation_decay, nontrivial_term)),
    NumberExercise("deml.stationary_mass", "the walk's limit mass on the bird of two toy maps",
                   "The limit is pi = d / sum(d) with d_a the summed distance of position a to all others. On a "
                   "one-channel map the distance is |u_a - u_b|: count, for each kind of position, how many "
                   "positions of each other value it sees (32 background, the 4 bird positions), then add up "
                   "the bird's degrees and divide by the total.",
                   expected=lambda: (_bird_mass([1.0, 1.0, 1.0, 1.0]), _bird_mass([1.0, 1.0, 2.0, 2.0])), tol=1e-3),
    ExperimentExercise("deml.walk_gaps", "the object-attention walk step by step, against its limit",
                       "Flatten the map to positions u_a (C values each); W_ab = ||u_a - u_b|| (torch.cdist), "
                       "P = W / W.sum(-1, keepdim=True), the limit pi = W.sum(-1) / W.sum(); start from the uniform "
                       "mass 1 / (h w) and take m <- m P (mass moves along the edges), recording |m - pi|.sum() after "
                       "every step: a tensor (B, steps).",
                       reference=_walk_gaps, cases=_walk_cases, forbidden=(random_walk, object_attention)),
    ReasoningExercise("deml.walk_bipartite", "ten steps of the walk on the toy map with four equal bird values",
                      "On that map every edge joins a bird position to a background one (bird to bird and background "
                      "to background are at distance 0): follow where the mass of each group goes in one step, and "
                      "in the next.",
                      options=("reached", "converging slowly", "oscillates"), answer="oscillates"),
    PredictionExercise("deml.adversary_similarity",
                       "with the adversary, are the learners' mean cosine similarities lower, higher, or no clearly "
                       "different?",
                       "Read the 95% interval of the paired difference 'with minus without the adversary', seed by "
                       "seed, printed under \"Do the learners differ?\": 'lower' only if it lies below 0, 'higher' "
                       "only if above, otherwise 'no clear effect'. The paper's Table 4 has -0.08 against 0.92.",
                       options=("higher", "lower", "no clear effect")),
    FunctionExercise("deml_experiments.central_mass", "the share of an attention map's mass in the central box",
                     "The central box has sides of round(side / 2) pixels (at least one), starts at (side - box) // 2 "
                     "in each direction, and the share is the map's sum inside it over its whole sum, one number per "
                     "map.", reference=central_mass, cases=_attention_cases, forbidden=(central_mass, mass_on_object)),
    NumberExercise("deml_experiments.random_overlap",
                   "the Jaccard overlap of two random sets of 64 of the 1280 channels",
                   "A channel is in a random set of 64 with probability 64 / 1280, in both with its square: count "
                   "the expected size of the intersection, then of the union (64 + 64 minus the intersection), and "
                   "divide.", expected=_random_overlap, tol=5e-4),
    ReasoningExercise("deml_experiments.gaussian_centre",
                      "on a map with no layout, where does the released code's spatial Gaussian put the walk's limit?",
                      "With no layout every pair of positions is equally dissimilar, so each edge weight is the same "
                      "number times the Gaussian of the two positions' grid distance. The limit is proportional to a "
                      "position's degree, the sum of its weights: count the near neighbours of a corner and of a "
                      "central position.",
                      options=("centre", "border", "neither"), answer="centre"),
]
