"""The DeML chapter's figure at the derivation: the random walk of the object attention (Eqs. 2-3) over images, drawn
with the library's own walk (:func:`zslib.methods.deml.object_attention.object_attention`)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from zslib.analysis.viz import attention_panels
from zslib.engine.data import SynthParts
from zslib.methods.deml.object_attention import object_attention
from zslib.present.base import Section
from zslib.present.deml.quick import synth_normalize

__all__ = ["walk_figure"]


def walk_figure(count: int = 3, steps=(1, 3, 10), pool: int = 2) -> Section:
    """The walk's mass over ``count`` SynthParts images of the unseen classes (48 px), on the images' own pixels
    (average-pooled by ``pool``, so that each position is a colour vector): after each number of ``steps`` from the
    uniform start, at the limit (the closed form), and under the literal reading of Eq. 3 after 10 steps. The notes
    give the share of the mass that lies on the bird (its mask) in each column, averaged over the images."""
    data = SynthParts("unseen", image_size=48, images_per_class=1)
    images, _ = data.tensors()
    images = images[:count]
    masks = torch.as_tensor(data.object_masks()[:count]).float()
    fmap = F.avg_pool2d(synth_normalize(images).double(), pool)  # (B, 3, 24, 24): a colour vector per position
    on_bird = F.avg_pool2d(masks[:, None], pool)[:, 0].flatten(1).double()  # the bird's share of each position
    size = fmap.shape[-2:]
    columns = {f"T = {t}": object_attention(fmap, t) for t in steps}
    columns["limit π"] = object_attention(fmap, None)
    columns["as printed, T = 10"] = object_attention(fmap, 10, reading="literal")
    mass = {name: float((m.flatten(1) * on_bird).sum(1).mean()) for name, m in columns.items()}
    uniform = float(on_bird.mean())
    panels = {"image": images, **{name: m.reshape(-1, *size).float() for name, m in columns.items()}}
    fig = attention_panels(panels, size=1.5)
    shares = ", ".join(f"{share:.0%} ({name})" for name, share in mass.items())
    return Section(figure=fig, notes=[
        f"Each map is scaled to its own range (bright: more mass). The bird covers {uniform:.0%} of the positions, "
        f"so that is its share of the uniform start; the walk puts on it {shares}. The literal reading never "
        "leaves the uniform start, so its maps are flat."])
