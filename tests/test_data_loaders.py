"""Real-dataset loaders on tiny fixture trees in each format, bad inputs, downloads, transforms, cache."""
from __future__ import annotations

import hashlib
import http.server
import tarfile
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import zslib
from zslib import data as zd
from zslib.data import (CUB200, SOP, Cars196, ChecksumError, CorruptFileError, CountMismatchError, Flowers102,
                        InShop, ManualDownloadError, MissingDataError)

from data_fixtures import (CARS_SPEC, CUB_CLASSES, FLOWERS_LABELS, INSHOP_ROWS, SOP_TEST, SOP_TRAIN, build_cars_annos,
                           build_cars_devkit, build_cars_folders, build_cub, build_flowers, build_inshop, build_sop,
                           shared_data_dir)


# ---------------------------------------------------------------------------------------------- roots
def test_data_root_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "env"))
    assert zd.data_root(tmp_path / "arg") == tmp_path / "arg"
    assert zd.data_root() == tmp_path / "env"
    monkeypatch.delenv("ZS_DATA")
    repo = Path(zd.__file__).resolve().parents[2]
    assert zd.data_root() == repo / "data"  # running from the checkout


def test_missing_dataset_says_what_to_do(tmp_path):
    with pytest.raises(MissingDataError) as e:
        CUB200(root=tmp_path)
    msg = str(e.value)
    assert "CUB200.download" in msg and str(tmp_path / "cub200") in msg
    for cls in (Cars196, InShop):
        with pytest.raises(ManualDownloadError) as e:
            cls.download(tmp_path)
        assert str(tmp_path / cls.name) in str(e.value)


# ------------------------------------------------------------------------------------------------ CUB
def test_cub_split_by_class(tmp_path):
    build_cub(tmp_path)
    tr, te = CUB200(tmp_path, "train"), CUB200(tmp_path, "test")
    n_tr = sum(n for c, n in CUB_CLASSES.items() if c <= 100)
    assert len(tr) == n_tr and len(te) == sum(CUB_CLASSES.values()) - n_tr
    assert set(tr.labels) == {0, 1, 99} and set(te.labels) == {100, 199}
    assert tr.labels.dtype == np.int64
    for ds in (tr, te):  # each image lies in its class's folder: labels align with paths
        for p, y in zip(ds.paths, ds.labels):
            assert p.parent.name == f"{y + 1:03d}.Bird_{y + 1}"
    assert tr.class_names[199] == "200.Bird_200"
    img, y = te[0]
    assert img.mode == "RGB" and img.size == (20, 14) and y == 100
    # the dataset folder itself is accepted as root too
    assert len(CUB200(tmp_path / "cub200" / "CUB_200_2011", "test")) == len(te)


def test_cub_strict_counts(tmp_path):
    build_cub(tmp_path)
    CUB200(tmp_path, "train")  # a small tree is fine by default
    with pytest.raises(CountMismatchError, match="5864 images of 100 classes"):
        CUB200(tmp_path, "train", strict=True)


def test_cub_missing_and_truncated_lists(tmp_path):
    folder = build_cub(tmp_path)
    lab = folder / "image_class_labels.txt"
    lines = lab.read_text().splitlines()
    lab.write_text("\n".join(lines[:-2]) + "\n")  # truncated list
    with pytest.raises(CorruptFileError, match="image_class_labels.txt"):
        CUB200(tmp_path)
    lab.unlink()
    with pytest.raises(MissingDataError, match="image_class_labels.txt"):
        CUB200(tmp_path)


def test_missing_image_is_an_error_not_a_smaller_dataset(tmp_path):
    folder = build_cub(tmp_path)
    victim = sorted((folder / "images").rglob("*.jpg"))[0]
    victim.unlink()
    with pytest.raises(MissingDataError) as e:
        CUB200(tmp_path, "train")
    assert str(victim) in str(e.value) and "1 of the" in str(e.value)


def test_unreadable_image_names_the_file(tmp_path):
    folder = build_cub(tmp_path)
    ds = CUB200(tmp_path, "train")
    bad = ds.paths[1]
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 3])  # truncated JPEG
    with pytest.raises(CorruptFileError) as e:
        ds[1]
    assert str(bad) in str(e.value) and "re-extract" in str(e.value)
    bad.write_bytes(b"this is not an image")
    with pytest.raises(CorruptFileError, match=str(bad.name)):
        ds[1]
    assert ds[0][1] == ds.labels[0]  # other images still load


# ---------------------------------------------------------------------------------------------- Cars
def _cars_expected(split):
    cls = [c for c, n in CARS_SPEC for _ in range(n) if (c <= 98) == (split == "train")]
    return sorted(c - 1 for c in cls)


@pytest.mark.parametrize("layout", ["annos", "devkit", "devkit_labels_in_devkit", "folders", "folders_numeric"])
def test_cars_layouts_agree(tmp_path, layout):
    if layout == "annos":
        build_cars_annos(tmp_path)
    elif layout.startswith("devkit"):
        build_cars_devkit(tmp_path, labels_in_devkit=layout.endswith("devkit"))
    else:
        build_cars_folders(tmp_path, numeric=layout.endswith("numeric"))
    for split in ("train", "test"):
        ds = Cars196(tmp_path, split)
        assert sorted(ds.labels.tolist()) == _cars_expected(split)
        assert all(p.is_file() for p in ds.paths)
    ds = Cars196(tmp_path, "test")
    # the same image (same pixels) carries the same label in every layout
    arr = {int(np.asarray(ds.load_image(i)).sum()): int(y) for i, y in enumerate(ds.labels)}
    if layout != "folders_numeric":
        assert ds.class_names[149] == "Ram C/V Cargo Van Minivan 2012"
    ref = tmp_path / "ref"
    build_cars_annos(ref)
    ref_ds = Cars196(ref, "test")
    ref_arr = {int(np.asarray(ref_ds.load_image(i)).sum()): int(y) for i, y in enumerate(ref_ds.labels)}
    assert arr == ref_arr


def test_cars_folders_need_the_official_order(tmp_path):
    build_cars_folders(tmp_path, names_file=False)
    with pytest.raises(MissingDataError, match="names.csv"):
        Cars196(tmp_path)


def test_cars_devkit_without_test_labels(tmp_path):
    folder = build_cars_devkit(tmp_path)
    (folder / "cars_test_annos_withlabels.mat").unlink()
    with pytest.raises(MissingDataError, match="cars_test_annos_withlabels.mat"):
        Cars196(tmp_path)


def test_truncated_mat_file(tmp_path):
    folder = build_cars_annos(tmp_path)
    f = folder / "cars_annos.mat"
    f.write_bytes(f.read_bytes()[:200])
    with pytest.raises(CorruptFileError, match="cars_annos.mat"):
        Cars196(tmp_path)


# ----------------------------------------------------------------------------------------------- SOP
def test_sop_splits(tmp_path):
    build_sop(tmp_path)
    tr, te = SOP(tmp_path, "train"), SOP(tmp_path, "test")
    assert sorted(tr.labels.tolist()) == sorted(c - 1 for c, _, n in SOP_TRAIN for _ in range(n))
    assert sorted(te.labels.tolist()) == sorted(c - 1 for c, _, n in SOP_TEST for _ in range(n))
    assert not set(tr.labels) & set(te.labels)
    assert tr.super_labels.tolist() == [0, 0, 0, 0, 0, 1]
    with pytest.raises(CountMismatchError, match="59551 images of 11318 classes"):
        SOP(tmp_path, "train", strict=True)


def test_sop_bad_header(tmp_path):
    folder = build_sop(tmp_path)
    f = folder / "Ebay_test.txt"
    f.write_text("\n".join(f.read_text().splitlines()[1:]) + "\n")
    with pytest.raises(CorruptFileError, match="Ebay_test.txt"):
        SOP(tmp_path, "test")


# -------------------------------------------------------------------------------------------- In-Shop
def test_inshop_partition(tmp_path):
    build_inshop(tmp_path)
    tr, q, g, te = (InShop(tmp_path, s) for s in ("train", "query", "gallery", "test"))
    status = [s for _, s in INSHOP_ROWS]
    assert (len(tr), len(q), len(g)) == (status.count("train"), status.count("query"), status.count("gallery"))
    assert sorted(set(tr.labels)) == [0, 1]  # train items come first
    assert set(q.labels) == set(g.labels) and not set(q.labels) & set(tr.labels)
    assert len(te) == len(q) + len(g) and te.is_query.sum() == len(q)
    qi, gi = te.query_gallery()
    assert te.labels[qi].tolist() == q.labels.tolist() and te.labels[gi].tolist() == g.labels.tolist()
    for ds in (tr, q, g):  # item id is in the path
        for p, y in zip(ds.paths, ds.labels):
            assert p.parent.name == ds.class_names[y]


def test_inshop_truncated_partition(tmp_path):
    build_inshop(tmp_path, declared=len(INSHOP_ROWS) + 5)
    with pytest.raises(CorruptFileError, match="list_eval_partition.txt"):
        InShop(tmp_path)


# -------------------------------------------------------------------------------------------- Flowers
def test_flowers_fixture(tmp_path):
    build_flowers(tmp_path)
    tr, te, al = (Flowers102(tmp_path, s) for s in ("train", "test", "all"))
    labels = np.array(FLOWERS_LABELS) - 1
    assert tr.labels.tolist() == labels[labels < 51].tolist()
    assert te.labels.tolist() == labels[labels >= 51].tolist()
    assert len(al) == len(FLOWERS_LABELS)
    assert [p.name for p in tr.paths] == [f"image_{i + 1:05d}.jpg" for i in np.flatnonzero(labels < 51)]


REAL_FLOWERS = shared_data_dir() / "flowers102"


@pytest.mark.shared_data
@pytest.mark.skipif(not (REAL_FLOWERS / "imagelabels.mat").is_file(), reason="../shared/data/flowers102 absent")
def test_flowers_real_folder():
    tr = Flowers102(REAL_FLOWERS.parent, "train", strict=True)
    te = Flowers102(REAL_FLOWERS, "test", strict=True)
    assert tr.is_full_dataset and len(tr) + len(te) == 8189
    assert (len(tr), tr.num_classes, len(te), te.num_classes) == (3493, 51, 4696, 51)
    assert set(tr.labels) == set(range(51)) and set(te.labels) == set(range(51, 102))
    zd.verify_checksum(REAL_FLOWERS / "imagelabels.mat", md5=Flowers102.files["imagelabels.mat"])
    img, y = te[len(te) - 1]
    assert img.mode == "RGB" and min(img.size) == 160 and y == te.labels[-1]
    x = zd.test_transform(64, 72, zd.IMAGENET_MEAN, zd.IMAGENET_STD)(img)
    assert x.shape == (3, 64, 64)


# ------------------------------------------------------------------------------ archives and downloads
def _make_tgz(tmp_path) -> Path:
    src = build_flowers(tmp_path / "src")
    archive = tmp_path / "flowers.tgz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(src / "jpg", arcname="jpg")
    return archive


def test_extract_archive_and_truncated_archive(tmp_path):
    archive = _make_tgz(tmp_path)
    out = zd.extract_archive(archive, tmp_path / "out")
    assert len(list((out / "jpg").glob("*.jpg"))) == len(FLOWERS_LABELS)
    truncated = tmp_path / "truncated.tgz"
    truncated.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(CorruptFileError) as e:
        zd.extract_archive(truncated, tmp_path / "out2")
    assert str(truncated) in str(e.value) and "download it again" in str(e.value)


class _RangeHandler(http.server.BaseHTTPRequestHandler):
    payload = b""
    ranges: list = []

    def do_GET(self):  # noqa: N802
        data = type(self).payload
        rng = self.headers.get("Range")
        type(self).ranges.append(rng)
        start = int(rng.split("=")[1].split("-")[0]) if rng else 0
        body = data[start:]
        self.send_response(206 if rng else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture()
def http_server():
    server = http.server.HTTPServer(("127.0.0.1", 0), _RangeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()


def test_download_resumes_and_verifies(tmp_path, http_server):
    payload = np.random.default_rng(0).bytes(300_000)
    _RangeHandler.payload, _RangeHandler.ranges = payload, []
    url = f"http://127.0.0.1:{http_server.server_port}/file.bin"
    dest = tmp_path / "file.bin"
    (tmp_path / "file.bin.part").write_bytes(payload[:123_456])  # an interrupted earlier download
    md5 = hashlib.md5(payload).hexdigest()
    zd.download_url(url, dest, md5=md5, progress=False)
    assert dest.read_bytes() == payload and _RangeHandler.ranges == ["bytes=123456-"]
    assert not (tmp_path / "file.bin.part").exists()
    zd.download_url(url, dest, md5=md5, progress=False)  # present: verified, not fetched again
    assert len(_RangeHandler.ranges) == 1


def test_download_wrong_checksum(tmp_path, http_server):
    _RangeHandler.payload, _RangeHandler.ranges = b"x" * 1000, []
    url = f"http://127.0.0.1:{http_server.server_port}/a.tgz"
    with pytest.raises(ChecksumError) as e:
        zd.download_url(url, tmp_path / "a.tgz", md5="0" * 32, progress=False)
    assert "a.tgz.corrupt" in str(e.value) and (tmp_path / "a.tgz.corrupt").exists()
    assert not (tmp_path / "a.tgz").exists()
    # a file put in place by hand with the wrong content is reported, naming it
    (tmp_path / "b.mat").write_bytes(b"wrong")
    with pytest.raises(ChecksumError, match="b.mat"):
        zd.download_url(url, tmp_path / "b.mat", md5="0" * 32, progress=False)


# -------------------------------------------------------------------------------------------- transforms
def test_test_transform_is_center_crop_and_normalize():
    img = torch.arange(3 * 10 * 12, dtype=torch.uint8).reshape(3, 10, 12)
    mean, std = (0.1, 0.2, 0.3), (0.5, 0.25, 2.0)
    out = zd.test_transform(8, 10, mean, std)(img)  # resize to 10 is the identity here
    ref = img[:, 1:9, 2:10].float() / 255
    ref = (ref - torch.tensor(mean)[:, None, None]) / torch.tensor(std)[:, None, None]
    torch.testing.assert_close(out, ref)


def test_train_transform_crops_and_flips():
    img = torch.rand(3, 16, 16)
    tf = zd.train_transform(12, 16, None, None)
    seen_flip = seen_plain = False
    for s in range(30):
        torch.manual_seed(s)
        out = tf(img)
        assert out.shape == (3, 12, 12)
        # the crop (possibly flipped) must be a window of the input
        for cand, flag in ((out, "plain"), (out.flip(-1), "flip")):
            hits = [(i, j) for i in range(5) for j in range(5) if torch.equal(img[:, i:i + 12, j:j + 12], cand)]
            if hits:
                seen_plain |= flag == "plain"
                seen_flip |= flag == "flip"
                break
        else:
            raise AssertionError("train_transform output is not a crop of the input")
    assert seen_flip and seen_plain
    with pytest.raises(ValueError):
        zd.train_transform(64, 32, None, None)


# ------------------------------------------------------------------------------------------- cache
def test_pre_resized_cache(tmp_path):
    build_cub(tmp_path)
    ds = CUB200(tmp_path, "test")
    cache = zd.cached(ds, 12, cache_dir=tmp_path / "cache", progress=False)
    assert len(cache) == len(ds) and cache.labels.tolist() == ds.labels.tolist()
    for i in range(len(ds)):
        want = torch.from_numpy(zd.cache.resize_center_square(ds.load_image(i), 12)).permute(2, 0, 1)
        img, y = cache[i]
        torch.testing.assert_close(img, want.float() / 255)
        assert y == ds.labels[i]
    again = zd.cached(ds, 12, cache_dir=tmp_path / "cache", transform=zd.test_transform(8, 12, None, None))
    assert again[0][0].shape == (3, 8, 8)
    (again.path / "meta.json").write_text('{"size": 12, "count": 99}')
    with pytest.raises(CorruptFileError, match="build it again"):
        zd.PreResizedCache(again.path)


# ------------------------------------------------------------------------------------------- build
def test_build_dataset_quick_and_full(tmp_path):
    quick = zslib.PROFILES["quick"].replace(synth_images_per_class=2, image_size=32)
    tr, te = zd.build_dataset(quick, "train", True), zd.build_dataset(quick, "test", False)
    assert isinstance(tr, zd.SynthParts) and tr.split == "seen" and te.split == "unseen"
    assert tr[0][0].shape == (3, 32, 32) and not set(tr.labels) & set(te.labels)
    build_cub(tmp_path)
    full = zslib.PROFILES["full"].replace(image_size=16, resize_size=20)
    ds = zd.build_dataset(full, "test", False, root=tmp_path)
    assert isinstance(ds, CUB200) and ds.split == "test"
    x, _ = ds[0]
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32
    with pytest.raises(MissingDataError):
        zd.build_dataset(full.replace(dataset="sop"), "train", True, root=tmp_path)
