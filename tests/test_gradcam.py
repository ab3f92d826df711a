"""similarity_gradcam: captum's LayerGradCam on a cosine-similarity target.

Oracles: a direct autograd implementation of Grad-CAM, a closed form for a pooled-linear model, and a
SynthParts pair with a hand-built network for which the right answer is certain.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from zslib.engine.data.synthparts import SHORTCUT_COLORS, SynthParts
from zslib.engine.models import EmbeddingNet, build_model
from zslib.methods.adapt_adv.gdfl import GDFLNet
from zslib.engine.models.backbones import Backbone
from zslib.analysis.saliency import part_shares, similarity_gradcam


def _direct_gradcam(model, queries, ref_emb, stage, sign=1.0, size=None):
    """Grad-CAM by hand: the stage's map as a leaf, d(similarity)/d(map) by autograd, channel weights as
    spatial means of the gradient, ReLU of the weighted sum, bilinear upsampling, division by the maximum."""
    model.eval()
    fmap = model.run(queries, until=stage).detach().requires_grad_(True)
    if isinstance(model, GDFLNet):
        emb = model.forward_tapped(queries, {stage: lambda _: fmap})
    else:
        emb = model.embed_pooled(model.backbone.pool(model.run(fmap, start_after=stage)))
    sim = sign * F.cosine_similarity(emb, ref_emb, dim=1)
    (grad,) = torch.autograd.grad(sim.sum(), fmap)
    cam = F.relu((grad.mean((2, 3), keepdim=True) * fmap).sum(1, keepdim=True))
    cam = F.interpolate(cam, size=size or queries.shape[-2:], mode="bilinear", align_corners=False)[:, 0]
    return cam / cam.flatten(1).amax(1).clamp_min(1e-30)[:, None, None]


@pytest.mark.parametrize("kind", ["embedding", "gdfl"])
@pytest.mark.parametrize("counterfactual", [False, True])
def test_captum_matches_direct_autograd(kind, counterfactual):
    torch.manual_seed(0)
    model = build_model("smallcnn", 16)
    if kind == "gdfl":
        model = GDFLNet.from_embedding_net(model, form="multidimensional")
    g = torch.Generator().manual_seed(1)
    queries, references = torch.randn(3, 3, 48, 48, generator=g), torch.randn(3, 3, 48, 48, generator=g)
    model.train()
    ours = similarity_gradcam(model, queries, references, "stage3", counterfactual=counterfactual)
    assert model.training  # the mode is restored
    with torch.no_grad():
        ref_emb = model.eval()(references)
    direct = _direct_gradcam(model, queries, ref_emb, "stage3", -1.0 if counterfactual else 1.0)
    assert ours.shape == (3, 48, 48)
    assert torch.allclose(ours, direct, atol=1e-5)
    assert bool((ours >= 0).all()) and torch.allclose(ours.flatten(1).amax(1), torch.ones(3))
    # reference embeddings instead of images, and pairs computed one at a time, give the same maps
    assert torch.allclose(similarity_gradcam(model, queries, ref_emb, "stage3", counterfactual=counterfactual),
                          ours, atol=1e-6)
    alone = similarity_gradcam(model, queries[1:2], references[1:2], "stage3", counterfactual=counterfactual)
    assert torch.allclose(alone[0], ours[1], atol=1e-5)


def test_stage_name_and_layer_module_agree_and_one_reference_broadcasts():
    torch.manual_seed(0)
    model = build_model("smallcnn", 8).eval()
    q = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(2))
    r = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(3))
    by_name = similarity_gradcam(model, q, r, "stage2", normalize=False)
    by_layer = similarity_gradcam(model, q, r, layer=model.backbone.net.stage2, normalize=False)
    assert torch.allclose(by_name, by_layer, atol=1e-7)
    both = similarity_gradcam(model, q, r.expand(2, -1, -1, -1), "stage2", normalize=False)
    assert torch.allclose(by_name, both, atol=1e-7)
    assert similarity_gradcam(model, q, r, size=(8, 8)).shape == (2, 8, 8)  # default: the last stage


class _FixedStages(Backbone):
    """A backbone made of given modules (one stage each), for networks whose answer is known."""

    name = "fixed"

    def __init__(self, stages: dict, channels: dict, strides: dict):
        super().__init__("avg")
        self.net = nn.ModuleDict(stages)
        self.stage_channels, self.stage_strides, self.roles = dict(channels), dict(strides), {}

    def _stages(self):
        return [(n, self.net[n]) for n in self.stage_channels]


def _identity_head(backbone, d):
    net = EmbeddingNet(backbone, d, normalize=True)
    with torch.no_grad():
        net.head.linear.weight.copy_(torch.eye(d))
        net.head.linear.bias.zero_()
    return net


def test_closed_form_for_a_pooled_linear_model():
    """Map A = ReLU(1x1 conv of the image), e = W mean(A): ds/dA_c(j) = (W^T ds/de)_c / (h w) at every
    position, with ds/de = (r/|r| - s e/|e|) / |e| for s = cos(e, r). No autograd in the oracle."""
    torch.manual_seed(4)
    lift = nn.Sequential(nn.Conv2d(3, 5, 1), nn.ReLU())
    net = EmbeddingNet(_FixedStages({"lift": lift}, {"lift": 5}, {"lift": 1}), 4, normalize=True).eval()
    q = torch.rand(2, 3, 6, 7)
    r = torch.randn(2, 4)
    cam = similarity_gradcam(net, q, r, "lift", normalize=False).double().numpy()
    with torch.no_grad():
        A = lift(q).double().numpy()  # (2, 5, 6, 7)
    W = net.head.linear.weight.detach().double().numpy()
    b = net.head.linear.bias.detach().double().numpy()
    for i in range(2):
        e = W @ A[i].mean((1, 2)) + b
        rr = r[i].double().numpy()
        s = e @ rr / np.linalg.norm(e) / np.linalg.norm(rr)
        ds_de = (rr / np.linalg.norm(rr) - s * e / np.linalg.norm(e)) / np.linalg.norm(e)
        alpha = W.T @ ds_de / (6 * 7)  # the same gradient at every position, so its spatial mean is itself
        expect = np.maximum(np.einsum("c,chw->hw", alpha, A[i]), 0)
        np.testing.assert_allclose(cam[i], expect, rtol=1e-4, atol=1e-9)


# ----- the known-answer case on SynthParts ----------------------------------------------------------------
CHROMATIC = ("red", "green", "blue", "yellow", "magenta", "cyan")
NAMES = list(SHORTCUT_COLORS)


class _ColourDetectors(nn.Module):
    """One channel per colour: exp(-|chroma(x) - chroma(c)|^2 / (2 sigma^2)), chroma = x / |x| (blind to
    SynthParts' per-image brightness; blind to black/white/grey, hence chromatic colours only)."""

    def __init__(self, colours, sigma=0.1):
        super().__init__()
        c = torch.tensor([SHORTCUT_COLORS[k] for k in colours])
        self.register_buffer("centres", c / c.norm(dim=1, keepdim=True))
        self.sigma = sigma

    def forward(self, x):
        chroma = x / x.norm(dim=1, keepdim=True).clamp_min(1e-6)
        d2 = ((chroma[:, None] - self.centres[None, :, :, None, None]) ** 2).sum(2)
        return torch.exp(-d2 / (2 * self.sigma ** 2))


def _known_answer_pair():
    """An image whose body and head have chromatic colours b and h, and a second rendering of it (same pose,
    background, clutter, noise) whose body has a third colour c. The detectors for (b, c, h) respond on the
    body and the head only (checked), so the network's embedding is (body area x [b or c], head area x h)."""
    ds = SynthParts("seen", image_size=64, images_per_class=1, lazy=True)
    images, part_map, _ = ds.render(np.arange(len(ds)))
    images = images.float() / 255
    for i in range(len(ds)):
        body, head = NAMES[ds.attributes[i, 0]], NAMES[ds.attributes[i, 1]]
        if body not in CHROMATIC or head not in CHROMATIC or body == head:
            continue
        for other in (c for c in CHROMATIC if c not in (body, head)):
            colours = (body, other, head)
            resp = _ColourDetectors(colours)(images[i:i + 1])[0]
            on_parts = (part_map[i] == 1) | (part_map[i] == 2)
            if resp[:, ~on_parts].sum() < 0.02 * resp.sum():
                ref = SynthParts("seen", image_size=64, images_per_class=1, lazy=True)
                ref.attributes = ref.attributes.copy()
                ref.attributes[i, 0] = NAMES.index(other)
                ref_image, ref_parts, _ = ref.render([i])
                assert torch.equal(ref_parts[0], part_map[i])
                return images[i:i + 1], ref_image.float() / 255, part_map[i:i + 1], colours
    raise AssertionError("no SynthParts image of the first 50 classes has chromatic body and head colours that only "
                         "the body and head show; the rendering changed: widen the search")


def test_a_known_answer_on_synthparts():
    """Query and reference differ in the body colour only. Shared evidence (the head) makes them similar,
    the body makes them differ: Grad-CAM of the similarity must light the head and not the body, the
    counterfactual map the body and not the head (derivation in similarity_gradcam's docstring)."""
    query, reference, parts, colours = _known_answer_pair()
    net = _identity_head(_FixedStages({"detect": _ColourDetectors(colours), "down": nn.AvgPool2d(2)},
                                      {"detect": 3, "down": 3}, {"detect": 1, "down": 2}), 3)
    similar = part_shares(similarity_gradcam(net, query, reference, "detect"), parts)
    differ = part_shares(similarity_gradcam(net, query, reference, "detect", counterfactual=True), parts)
    assert similar["head"][0] > 0.9 and similar["body"][0] < 0.05
    assert differ["body"][0] > 0.95 and differ["head"][0] < 0.02
    # at half resolution, upsampled: blurred by the 2x2 cells but still on the right part
    coarse = part_shares(similarity_gradcam(net, query, reference, "down", counterfactual=True), parts)
    assert coarse["body"][0] > 0.7 and coarse["head"][0] < 0.02 and coarse["object"][0] > 0.85


def test_bad_inputs():
    model = build_model("smallcnn", 8)
    q = torch.zeros(2, 3, 32, 32)
    with pytest.raises(ValueError, match="references"):
        similarity_gradcam(model, q, torch.zeros(3, 8))
    with pytest.raises(ValueError, match="not both"):
        similarity_gradcam(model, q, q, "stage2", layer=model.backbone.net.stage2)
    with pytest.raises(ValueError, match="mode"):
        similarity_gradcam(model, q, q, mode="bicubic")
    with pytest.raises(ValueError, match="queries"):
        similarity_gradcam(model, q[0], q)
    with pytest.raises(TypeError, match="cannot reach stage"):
        similarity_gradcam(nn.Sequential(nn.Conv2d(3, 4, 3), nn.Flatten()), q, q, "conv")
