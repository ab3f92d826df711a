"""The DeML chapter's checked exercises. The main page (book/deml.ipynb): activation decay (Eq. 6) written by
hand, the stationary mass of the object-attention walk on a toy map, and whether the adversary of Eq. 4 made this
run's learners less alike. The experiments page (book/deml_experiments.ipynb): the centre share that scores the
object attention on photographs, the overlap of two random channel selections, and what the released code's
spatial Gaussian does to where the attention peaks.

Generated inputs are float64 and seeded, so a check gives the same verdict on every machine.
"""
from __future__ import annotations

import torch

from zslib.analysis.localization import central_mass, mass_on_object
from zslib.methods.deml.decoupled_losses import activation_decay, nontrivial_term
from zslib.methods.deml.object_attention import object_attention
from zslib.teaching.exercises.kinds import Case, ChoiceExercise, FunctionExercise, NumberExercise


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


def _lower_or_higher(with_adversary, without_adversary) -> str:
    return "lower" if float(with_adversary) < float(without_adversary) else "higher"


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


def _raises_or_lowers(plain, gaussian) -> str:
    return "raises" if float(gaussian) > float(plain) else "lowers"


class _VerbChoice(ChoiceExercise):
    """A choice between verbs that accepts each verb as the question writes it ("raise") and in its third person
    ("raises")."""

    def run(self, answer, **context):
        text = str(answer).strip().lower() if isinstance(answer, str) else answer
        full = {option[:-1]: option for option in self.options if option.endswith("s")}
        return super().run(full.get(text, answer), **context)


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
    ChoiceExercise("deml.adversary_similarity",
                   "with the adversary, is the learners' mean cosine similarity lower or higher than without?",
                   "Compare the two mean cosines reported under \"Do the learners differ?\" (DeML(1,4) against "
                   "DeML(1,4) no L_adv); the paper's Table 4 has -0.08 with the adversary and 0.92 without.",
                   options=("lower", "higher"), context=("with_adversary", "without_adversary"),
                   decide=_lower_or_higher),
    FunctionExercise("deml_experiments.central_mass", "the share of an attention map's mass in the central box",
                     "The central box has sides of round(side / 2) pixels (at least one), starts at (side - box) // 2 "
                     "in each direction, and the share is the map's sum inside it over its whole sum, one number per "
                     "map.", reference=central_mass, cases=_attention_cases, forbidden=(central_mass, mass_on_object)),
    NumberExercise("deml_experiments.random_overlap",
                   "the Jaccard overlap of two random sets of 64 of the 1280 channels",
                   "A channel is in a random set of 64 with probability 64 / 1280, in both with its square: count "
                   "the expected size of the intersection, then of the union (64 + 64 minus the intersection), and "
                   "divide.", expected=_random_overlap, tol=5e-4),
    _VerbChoice("deml_experiments.gaussian_peak",
                "does the released code's spatial Gaussian raise or lower how often the attention peaks on the bird?",
                "Read the 'peak on bird' column of the localization table: the row 'both, T=10 (paper)' is Eq. 2, "
                "the row 'both, T=10, Gaussian 0.15' the released code's graph.",
                options=("raises", "lowers"), context=("plain", "gaussian"), decide=_raises_or_lowers),
]
