"""Real-dataset loaders on tiny fixture trees in each format, bad inputs, downloads, transforms, cache."""
from __future__ import annotations

import hashlib
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest
import scipy.io
import torch

import zslib
from zslib.engine import data as zd
from zslib.engine.data import (CUB200, SOP, Cars196, ChecksumError, CorruptFileError, CountMismatchError, Flowers102,
                               InShop, ManualDownloadError, MissingDataError)

from data_fixtures import (CARS_SPEC, CUB_CLASSES, FLOWERS_LABELS, INSHOP_ROWS, SOP_TEST, SOP_TRAIN, LocalServer,
                           build_cars_annos, build_cars_devkit, build_cars_folders, build_cub, build_flowers,
                           build_inshop, build_sop, shared_data_dir)


# ---------------------------------------------------------------------------------------------- roots
def test_data_root_order(tmp_path, monkeypatch):
    monkeypatch.setenv("ZS_DATA", str(tmp_path / "env"))
    assert zd.data_root(tmp_path / "arg") == tmp_path / "arg"
    assert zd.data_root() == tmp_path / "env"
    monkeypatch.delenv("ZS_DATA")
    repo = Path(zd.__file__).resolve().parents[3]
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
    build_cub(tmp_path)
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


# ------------------------------------------------------------------------------ damaged label files
# Every loader that reads a label file must refuse it when it is short (images without a label), long
# (a label twice, or labels for images that are not there), holds a fractional class id, or holds the
# wrong type; the error names the file and says what to do. Never a silently smaller or relabelled set.
def _edit_lines(path: Path, edit) -> None:
    path.write_text("\n".join(edit(path.read_text().splitlines())) + "\n")


def _set_field(line: str, col: int, value: str) -> str:
    parts = line.split()
    parts[col] = value
    return " ".join(parts)


def _cub(edit_labels=None, edit_images=None):
    def make(root):
        folder = build_cub(root)
        if edit_labels:
            _edit_lines(folder / "image_class_labels.txt", edit_labels)
        if edit_images:
            _edit_lines(folder / "images.txt", edit_images)
        return CUB200
    return make


def _cars(builder, edit=None, **kw):
    def make(root):
        builder(root, edit=edit, **kw)
        return Cars196
    return make


def _with_class(value, k=1):
    def edit(rows):
        rows = [dict(r) for r in rows]
        rows[k]["class"] = value
        return rows
    return edit


def _cars_folders(damage):
    def make(root):
        folder = build_cars_folders(root, numeric=damage == "float")
        names_csv = root / "cars196" / "names.csv"
        if damage == "short":
            _edit_lines(names_csv, lambda lines: lines[:-1])
        elif damage == "long":
            _edit_lines(names_csv, lambda lines: lines + ["Extra Car 2013"])
        elif damage == "duplicate":  # 196 lines, but one name twice and one class without a name
            _edit_lines(names_csv, lambda lines: lines[:1] + lines[:1] + lines[2:])
        elif damage == "float":  # class folders named by number: one is not a whole number
            (folder / "train" / "1").rename(folder / "train" / "1.7")
        elif damage == "wrong_type":  # the class order from a cars_meta.mat holding numbers, not names
            names_csv.unlink()
            scipy.io.savemat(root / "cars196" / "cars_meta.mat", {"class_names": np.arange(196.0)[None]})
        return Cars196
    return make


def _sop(fname, edit):
    def make(root):
        _edit_lines(build_sop(root) / fname, edit)
        return SOP
    return make


def _inshop(edit, declared_extra=0):
    def make(root):
        folder = build_inshop(root, declared=len(INSHOP_ROWS) + declared_extra)
        _edit_lines(folder / "list_eval_partition.txt", lambda lines: lines[:2] + edit(lines[2:]))
        return InShop
    return make


def _flowers(stored):
    def make(root):
        build_flowers(root, stored_labels=stored)
        return Flowers102
    return make


_F = np.array(FLOWERS_LABELS)
LABEL_DAMAGE = {
    # name: (build and damage, expected error, the file the message must name)
    "cub-short": (_cub(edit_labels=lambda ls: ls[:-1]), CorruptFileError, "image_class_labels.txt"),
    "cub-short-both-lists": (_cub(edit_labels=lambda ls: ls[:-1], edit_images=lambda ls: ls[:-1]),
                             CorruptFileError, "images.txt"),
    "cub-long-duplicate": (_cub(edit_labels=lambda ls: ls + [_set_field(ls[0], 1, "2")]), CorruptFileError,
                           "image_class_labels.txt"),
    "cub-long-unknown-image": (_cub(edit_labels=lambda ls: ls + ["999 1"]), CorruptFileError,
                               "image_class_labels.txt"),
    "cub-float": (_cub(edit_labels=lambda ls: [_set_field(ls[0], 1, "1.7")] + ls[1:]), CorruptFileError,
                  "image_class_labels.txt"),
    "cub-wrong-type": (_cub(edit_labels=lambda ls: [_set_field(ls[0], 1, "abc")] + ls[1:]), CorruptFileError,
                       "image_class_labels.txt"),
    "cars-annos-short": (_cars(build_cars_annos, lambda rows: rows[:-1]), CorruptFileError, "cars_annos.mat"),
    "cars-annos-long": (_cars(build_cars_annos, lambda rows: rows + rows[:1]), CorruptFileError, "cars_annos.mat"),
    "cars-annos-float": (_cars(build_cars_annos, _with_class(1.7)), CorruptFileError, "cars_annos.mat"),
    "cars-annos-wrong-type": (_cars(build_cars_annos, _with_class("abc")), CorruptFileError, "cars_annos.mat"),
    "cars-devkit-short": (_cars(build_cars_devkit, lambda rows: rows[:-1]), CorruptFileError,
                          "cars_test_annos_withlabels.mat"),
    "cars-devkit-long": (_cars(build_cars_devkit, lambda rows: rows + rows[:1]), CorruptFileError,
                         "cars_test_annos_withlabels.mat"),
    "cars-devkit-float": (_cars(build_cars_devkit, _with_class(150.5)), CorruptFileError,
                          "cars_test_annos_withlabels.mat"),
    "cars-devkit-wrong-type": (_cars(build_cars_devkit, _with_class("150")), CorruptFileError,
                               "cars_test_annos_withlabels.mat"),
    "cars-folders-names-short": (_cars_folders("short"), CorruptFileError, "names.csv"),
    "cars-folders-names-long": (_cars_folders("long"), CorruptFileError, "names.csv"),
    "cars-folders-names-duplicate": (_cars_folders("duplicate"), CorruptFileError, "names.csv"),
    "cars-folders-float": (_cars_folders("float"), CorruptFileError, "1.7"),
    "cars-folders-wrong-type": (_cars_folders("wrong_type"), CorruptFileError, "cars_meta.mat"),
    "sop-short": (_sop("Ebay_test.txt", lambda ls: ls[:-1]), CorruptFileError, "Ebay_test.txt"),
    "sop-long": (_sop("Ebay_train.txt", lambda ls: ls + ls[-1:]), CorruptFileError, "Ebay_train.txt"),
    "sop-float": (_sop("Ebay_train.txt", lambda ls: ls[:1] + [_set_field(ls[1], 1, "1.7")] + ls[2:]),
                  CorruptFileError, "Ebay_train.txt"),
    "sop-wrong-type": (_sop("Ebay_test.txt", lambda ls: ls[:1] + [_set_field(ls[1], 1, "abc")] + ls[2:]),
                       CorruptFileError, "Ebay_test.txt"),
    "inshop-short": (_inshop(lambda rows: rows[:-1]), CorruptFileError, "list_eval_partition.txt"),
    "inshop-long": (_inshop(lambda rows: rows + rows[:1], declared_extra=1), CorruptFileError,
                    "list_eval_partition.txt"),
    "inshop-float": (_inshop(lambda rows: [_set_field(rows[0], 1, "1.7")] + rows[1:]), CorruptFileError,
                     "list_eval_partition.txt"),
    "inshop-wrong-type": (_inshop(lambda rows: [_set_field(rows[0], 1, "17")] + rows[1:]), CorruptFileError,
                          "list_eval_partition.txt"),
    "flowers-short": (_flowers(np.array(FLOWERS_LABELS[:-2], np.uint8)[None]), CorruptFileError,
                      "imagelabels.mat"),
    # the two labels too many belong to test classes: the train split must refuse the file all the same
    "flowers-long": (_flowers(np.array(FLOWERS_LABELS + [80, 90], np.uint8)[None]), MissingDataError,
                     "imagelabels.mat"),
    "flowers-float": (_flowers(np.where(_F == 77, 1.7, _F).astype(np.float64)[None]), CorruptFileError,
                      "imagelabels.mat"),
    "flowers-wrong-type": (_flowers(np.array([str(c) for c in FLOWERS_LABELS])[None]), CorruptFileError,
                           "imagelabels.mat"),
    "flowers-two-rows": (_flowers(np.stack([_F, _F]).astype(np.uint8)), CorruptFileError, "imagelabels.mat"),
}


@pytest.mark.parametrize("damage", sorted(LABEL_DAMAGE))
def test_damaged_label_file_is_refused(tmp_path, damage):
    make, error, fname = LABEL_DAMAGE[damage]
    cls = make(tmp_path)
    for split in ("train", "test"):
        with pytest.raises(error) as e:
            cls(tmp_path, split)
        msg = str(e.value)
        assert fname in msg, msg
        assert re.search(r"download|unpack|replace|re-extract|rename", msg, re.IGNORECASE), msg


def test_label_files_cover_every_dataset_and_damage():
    """Every loader with a label file (Cars196 in each layout) is tested with each kind of damage."""
    kinds = ("short", "long", "float", "wrong-type")
    for dataset in ("cub", "cars-annos", "cars-devkit", "cars-folders", "sop", "inshop", "flowers"):
        for kind in kinds:
            assert any(d.startswith(f"{dataset}-") and (f"-{kind}" in d) for d in LABEL_DAMAGE), (dataset, kind)


@pytest.mark.shared_data
@pytest.mark.skipif(not (REAL_FLOWERS / "jpg" / "image_08189.jpg").is_file(), reason="../shared/data/flowers102 absent")
def test_flowers_real_images_with_a_short_label_file(tmp_path):
    """The reported case: all 8,189 images, an imagelabels.mat of 8,000 entries. It used to load as
    3,445 + 4,555 images without a word."""
    labels = scipy.io.loadmat(str(REAL_FLOWERS / "imagelabels.mat"))["labels"]
    folder = tmp_path / "flowers102"
    folder.mkdir()
    (folder / "jpg").symlink_to(REAL_FLOWERS / "jpg", target_is_directory=True)
    scipy.io.savemat(folder / "imagelabels.mat", {"labels": labels[:, :8000]})
    for split in ("train", "test"):
        with pytest.raises(CorruptFileError) as e:
            Flowers102(tmp_path, split)
        msg = str(e.value)
        assert "imagelabels.mat" in msg and "8000" in msg and "189" in msg and "image_08001.jpg" in msg, msg


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


@pytest.fixture()
def http_server():
    with LocalServer() as server:
        yield server


def test_download_resumes_and_verifies(tmp_path, http_server):
    payload = np.random.default_rng(0).bytes(300_000)
    http_server.payload = payload
    url = http_server.url("file.bin")
    dest = tmp_path / "file.bin"
    (tmp_path / "file.bin.part").write_bytes(payload[:123_456])  # an interrupted earlier download
    md5 = hashlib.md5(payload).hexdigest()
    zd.download_url(url, dest, md5=md5, progress=False)
    assert dest.read_bytes() == payload and http_server.ranges == ["bytes=123456-"]
    assert not (tmp_path / "file.bin.part").exists()
    zd.download_url(url, dest, md5=md5, progress=False)  # present: verified, not fetched again
    assert len(http_server.ranges) == 1


def test_download_wrong_checksum(tmp_path, http_server):
    http_server.payload = b"x" * 1000
    url = http_server.url("a.tgz")
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
    """The cache stores torchvision's Resize of each image (the oracle) and reads it back as the source does.
    (The transparency of the cache, bitwise, is checked in tests/test_image_cache.py.)"""
    from torchvision.transforms import v2

    build_cub(tmp_path)
    ds = CUB200(tmp_path, "test")
    cache = zd.cached(ds, 12, cache_dir=tmp_path / "cache", progress=False)
    assert isinstance(cache, zd.PreResizedCache)
    assert len(cache) == len(ds) and cache.labels.tolist() == ds.labels.tolist() and cache.split == "test"
    for i in range(len(ds)):
        want = torch.from_numpy(np.array(v2.Resize(12)(ds.load_image(i)))).permute(2, 0, 1)
        img, y = cache[i]
        assert torch.equal(img, want) and y == ds.labels[i]
    again = zd.cached(ds, 12, cache_dir=tmp_path / "cache", transform=zd.test_transform(8, 12, None, None))
    assert again[0][0].shape == (3, 8, 8)
    with pytest.raises(TypeError, match="load_image"):
        zd.cached(torch.utils.data.TensorDataset(torch.zeros(2, 3, 4, 4)), 12)


# ------------------------------------------------------------------------------------------- build
def test_build_dataset_quick_and_full(tmp_path):
    quick = zslib.PROFILES["quick"].replace(synth_images_per_class=2, image_size=32)
    tr, te = zd.build_dataset(quick, "train", True), zd.build_dataset(quick, "test", False)
    assert isinstance(tr, zd.SynthParts) and tr.split == "seen" and te.split == "unseen"
    assert tr[0][0].shape == (3, 32, 32) and not set(tr.labels) & set(te.labels)
    build_cub(tmp_path)
    full = zslib.PROFILES["full"].replace(image_size=16, resize_size=20)
    ds = zd.build_dataset(full, "test", False, root=tmp_path)
    # the full profile reads its images through the pre-resized image cache (tests/test_image_cache.py)
    assert isinstance(ds, zd.PreResizedCache) and isinstance(ds.source, CUB200) and ds.split == "test"
    assert isinstance(zd.build_dataset(full.replace(image_cache=False), "test", False, root=tmp_path), CUB200)
    x, _ = ds[0]
    assert x.shape == (3, 16, 16) and x.dtype == torch.float32
    with pytest.raises(MissingDataError):
        zd.build_dataset(full.replace(dataset="sop"), "train", True, root=tmp_path)
