"""Loaders for the five real benchmarks, split by the zero-shot protocol of the papers.

=============  ==========================  ===========================================  ===============
class          dataset                     zero-shot split (train = seen, test = unseen)  reference
=============  ==========================  ===========================================  ===============
``CUB200``     CUB-200-2011                classes 1-100 / 101-200                      Wah et al. 2011
``Cars196``    Stanford Cars               classes 1-98 / 99-196                        Krause et al. 2013
``SOP``        Stanford Online Products    ``Ebay_train.txt`` / ``Ebay_test.txt``       Song et al. 2016
``InShop``     DeepFashion In-Shop         train / query / gallery of                   Liu et al. 2016
                                           ``list_eval_partition.txt``
``Flowers102`` Oxford Flowers-102          classes 1-51 / 52-102 (Adapt-Adv protocol)   Nilsback & Zisserman 2008
=============  ==========================  ===========================================  ===============

The splits and image counts are those of CML (Chen et al., TNNLS 2022, Sec. V-B), JRD (Chu et al.,
ICML 2020, Sec. 5) and Adapt-Adv (Al-Kaabi et al. 2022, Table 1).

Every loader is ``Cls(root=None, split=..., transform=None)`` and has ``labels`` (int64 numpy,
0-based class ids; the train split's ids are ``0 .. C-1`` and the test classes follow, so the two
splits never share an id), ``paths`` (absolute :class:`~pathlib.Path` objects), ``class_names``
(for the global ids), ``__len__`` and ``__getitem__ -> (image, label)`` where the image is a PIL
RGB image, or ``transform(image)``. ``root`` is either the data root (see :func:`data_root`; the
dataset then lives in its sub-folder such as ``cub200/``) or the dataset folder itself.

A damaged tree never turns into a silently smaller (or relabelled) dataset. When a dataset is built:

* every label file must give exactly one label to each image: an image listed twice, an image on disk
  that the label file does not cover (a short file) and a listed image that is not on disk (a long
  file, or an incomplete extraction) are errors, over the whole dataset and not only the split asked
  for (the disk scans and existence checks are skipped with ``verify_files=False``);
* class ids must be whole numbers of the file's own type: a fractional id (1.7), text where a number
  belongs, or a label array of the wrong shape is an error, never truncated or parsed into something;
* counts are compared with the official ones when ``strict=True``, or automatically (``strict=None``)
  when the files describe the complete dataset (a tree with every image but a short label file
  therefore fails the coverage check above rather than passing as a smaller dataset);
* an image that cannot be decoded raises an error naming it when it is read.

Every error names the file and says what to do.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.io
from torch.utils.data import Dataset

from zslib.engine.checks import class_id_array
from zslib.engine.data.download import download_url, extract_archive, mirrored
from zslib.engine.data.errors import CorruptFileError, CountMismatchError, ManualDownloadError, MissingDataError
from zslib.engine.data.images import load_image as decode
from zslib.engine.data.root import data_root
from zslib.engine.profile import downloads_allowed

__all__ = ["RealImageDataset", "CUB200", "Cars196", "SOP", "InShop", "Flowers102", "DATASETS",
           "get_dataset_class", "load_image", "open_dataset"]

_IMAGE_EXT = {".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff"}


def load_image(path: str | os.PathLike):
    """Open an image as PIL RGB, decoding it fully; a missing, unreadable or oversized file, a high-depth image
    without an 8-bit form or a name that is not UTF-8 raises an error naming it (:mod:`zslib.engine.data.images`)."""
    return decode(path)


def _read_lines(path: Path) -> list[str]:
    if not path.is_file():
        raise MissingDataError(f"{path} is missing. The dataset folder is incomplete: unpack the "
                               "original archive again so that this file is in place.")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise CorruptFileError(f"{path} is not a text file ({e}); replace it with the original.") from e
    return [ln for ln in text.splitlines() if ln.strip()]


def _parse_columns(path: Path, lines: list[str], ncols: int, start_line: int = 1) -> list[list[str]]:
    rows = []
    for k, line in enumerate(lines):
        parts = line.split(maxsplit=ncols - 1)
        if len(parts) != ncols:
            raise CorruptFileError(f"{path}, line {k + start_line}: expected {ncols} columns, got "
                                   f"{line!r}. The file is damaged or truncated; replace it with the original.")
        rows.append(parts)
    return rows


def _loadmat(path: Path) -> dict:
    if not path.is_file():
        raise MissingDataError(f"{path} is missing. Put the original file there (see data/README.md).")
    try:
        return scipy.io.loadmat(str(path), squeeze_me=True, struct_as_record=True)
    except Exception as e:  # scipy raises several types for damaged files
        raise CorruptFileError(f"{path} cannot be read as a MATLAB file ({type(e).__name__}: {e}); "
                               "it is truncated or damaged. Replace it with the original.") from e


def _mat_field(path: Path, struct, name: str) -> list:
    """Values of one field of a MATLAB struct array loaded with ``squeeze_me=True``."""
    arr = np.atleast_1d(struct)
    if arr.dtype.names is None or name not in arr.dtype.names:
        raise CorruptFileError(f"{path} has no field {name!r} in its annotations (fields: "
                               f"{arr.dtype.names}); it is not the expected annotation file.")
    return [v.item() if isinstance(v, np.ndarray) and v.size == 1 else v for v in arr[name]]


def _int_column(path: Path, rows: list[list[str]], col: int, what: str, start_line: int = 1) -> np.ndarray:
    """Column ``col`` of a text list as int64; a token that is not a whole number >= 1 (such as
    ``1.7``, ``-3`` or ``abc``) is an error naming the file and the line, never truncated."""
    out = np.empty(len(rows), dtype=np.int64)
    for k, r in enumerate(rows):
        tok = r[col]
        if not (tok.isascii() and tok.isdigit() and int(tok) >= 1):
            raise CorruptFileError(f"{path}, line {k + start_line}: the {what} {tok!r} is not a whole number "
                                   ">= 1. The file is damaged or not the original; replace it with the one "
                                   "from the dataset archive (unpack it again).")
        out[k] = int(tok)
    return out


def _mat_class_ids(path: Path, values, what: str = "class ids") -> np.ndarray:
    """Class ids read from a MATLAB file as a 1-D int64 array: integer-valued numbers only (MATLAB
    stores whole numbers as doubles); fractions, text and a wrong shape raise an error naming the file."""
    try:
        return class_id_array(np.asarray(values), name=f"the {what} in {path}", of="the image list")
    except (TypeError, ValueError) as e:
        raise CorruptFileError(f"{e}. The file is damaged or not the original: replace {path.name} with "
                               "the original (download it again).") from None


def _unique_ids(path: Path, ids: np.ndarray, what: str = "image id") -> None:
    """Each id appears on one line only: a second line for an id is a second, conflicting label."""
    values, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        dup = values[counts > 1]
        raise CorruptFileError(f"{path} has {int(counts[counts > 1][0])} lines for {what} {int(dup[0])} "
                               f"({len(dup)} {what}(s) in all have more than one line); each image must have exactly "
                               "one label. Replace the file with the original (unpack the archive again).")


def _image_files(roots) -> set[str]:
    """Paths (normalized strings) of the image files under the given folders, recursively."""
    found = set()
    for root in roots:
        for dirpath, _, names in os.walk(root):
            found.update(os.path.normpath(os.path.join(dirpath, n)) for n in names
                         if os.path.splitext(n)[1].lower() in _IMAGE_EXT)
    return found


def _one_label_per_image(lists: dict, image_roots=(), *, scan: bool = True, remedy: str = "") -> None:
    """Check that ``lists`` (label file -> the image paths it labels) gives one label to each image.

    * an image listed twice (in one file, or in two) is an error naming the file(s);
    * with ``scan``: every image file under ``image_roots`` must be listed (else the label file is
      short and the dataset would silently shrink), and every listed image must exist (else the label
      file is long or the extraction incomplete).
    ``remedy`` is appended to the messages: what to download or unpack again.
    """
    remedy = remedy or "Replace the label file with the original (download or unpack it again)."
    owner: dict[str, Path] = {}
    for f, paths in lists.items():
        counts = Counter(os.path.normpath(str(p)) for p in paths)
        twice = [p for p, n in counts.items() if n > 1]
        if twice:
            raise CorruptFileError(f"{f} lists the image {twice[0]} {counts[twice[0]]} times ({len(twice)} "
                                   f"image(s) in all more than once); each image must have exactly one "
                                   f"label. {remedy}")
        for p in counts:
            if p in owner:
                raise CorruptFileError(f"the image {p} is listed both in {owner[p]} and in {f}; each image "
                                       f"must have exactly one label. {remedy}")
            owner[p] = f
    if not scan:
        return
    files = " and ".join(str(f) for f in lists)
    roots = [r for r in dict.fromkeys(image_roots) if Path(r).is_dir()]
    on_disk = _image_files(roots)
    unlabelled = sorted(on_disk.difference(owner))
    if unlabelled:
        where = str(roots[0]) if len(roots) == 1 else f"the {len(roots)} image folders of {Path(roots[0]).parent}"
        raise CorruptFileError(
            f"{len(unlabelled)} of the {len(on_disk)} images in {where} have no label: {files} label only "
            f"{len(owner)} images (first unlabelled: {', '.join(unlabelled[:3])}). The label file is "
            f"truncated or not the original; the dataset is not used with images left out. {remedy}")
    absent = [p for p in owner if p not in on_disk and not os.path.isfile(p)]
    if absent:
        raise MissingDataError(
            f"{len(absent)} of the {len(owner)} images listed in {files} are missing (first: "
            f"{', '.join(absent[:3])}). Either the extraction was incomplete or the label file is not the "
            f"original and lists images the release does not have. {remedy}")


def _class_names(path: Path, values, n: int) -> list[str]:
    """``n`` distinct class names (text) from a names file, in file order."""
    names = list(np.atleast_1d(values)) if not isinstance(values, list) else values
    bad = next((v for v in names if not isinstance(v, str)), None)
    if len(names) != n or bad is not None or len(set(names)) != n:
        problem = (f"{len(names)} entries" if len(names) != n else
                   f"a value of type {type(bad).__name__} ({bad!r})" if bad is not None else
                   f"{n - len(set(names))} repeated names")
        raise CorruptFileError(f"{path} should hold the {n} distinct class names (text) in the official "
                               f"order, but it has {problem}. The file is damaged or not the original; "
                               "replace it with the original (download it again).")
    return [str(v) for v in names]


def _mat_key(path: Path, mat: dict, key: str):
    if key not in mat:
        keys = sorted(k for k in mat if not k.startswith("__"))
        raise CorruptFileError(f"{path} has no variable {key!r} (it has {keys}); it is not the "
                               "expected file.")
    return mat[key]


class RealImageDataset(Dataset):
    """Common machinery: a list of image files with integer labels and a split name."""

    name = ""  # sub-folder of the data root
    title = ""
    splits: tuple[str, ...] = ("train", "test")
    # {"total": images, split: (images, classes)}, from the papers and the datasets' pages
    official: dict = {}
    manual_instructions = ""

    def __init__(self, root=None, split: str = "train", transform=None, *, strict: bool | None = None,
                 verify_files: bool = True):
        split = str(split).lower()
        if split not in self.splits:
            raise ValueError(f"{type(self).__name__} has splits {self.splits}, not {split!r}")
        self.split = split
        self.transform = transform
        self.strict = strict
        self.verify_files = bool(verify_files)
        self.label_files: list[Path] = []  # the annotation files the labels come from (set by _load_split)
        self._all_images_checked = False  # set by _load_split when _one_label_per_image scanned the disk
        self.root = self._locate(root)
        paths, labels, class_names, is_full = self._load_split(self.root, split)
        self.paths = [Path(p) for p in paths]
        self.labels = np.asarray(labels, dtype=np.int64)
        self.class_names = list(class_names)
        self.is_full_dataset = bool(is_full)
        if strict or (strict is None and is_full):
            self._check_counts()
        if verify_files and not self._all_images_checked:
            self._check_files()

    # -- subclass hooks -------------------------------------------------------------------------
    def _load_split(self, folder: Path, split: str):  # pragma: no cover - abstract
        """Return (paths, labels, class_names, annotation_files_describe_full_dataset).

        It reads the whole label file(s), validates them (:func:`_int_column`, :func:`_mat_class_ids`,
        :meth:`_check_labelling`) and returns the requested split."""
        raise NotImplementedError

    def _check_labelling(self, lists: dict, image_roots=None, remedy: str = "") -> None:
        """One label per image over the whole dataset (see :func:`_one_label_per_image`); the folders
        ``image_roots`` are scanned when given and the dataset verifies its files. Called once per
        group of label files that must cover a group of image folders."""
        self.label_files += [f for f in lists if f not in self.label_files]
        scan = self.verify_files and image_roots is not None
        _one_label_per_image(lists, image_roots or (), scan=scan, remedy=remedy)
        self._all_images_checked = scan

    @classmethod
    def _candidates(cls, base: Path) -> list[Path]:
        return [base, base / cls.name]

    @classmethod
    def _is_dataset_folder(cls, folder: Path) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- machinery ------------------------------------------------------------------------------
    @classmethod
    def _locate(cls, root) -> Path:
        base = data_root(root)
        tried = []
        for folder in cls._candidates(base):
            tried.append(str(folder))
            if folder.is_dir() and cls._is_dataset_folder(folder):
                return folder
        raise MissingDataError(
            f"{cls.title} was not found; looked in: {', '.join(dict.fromkeys(tried))}. "
            f"{cls.how_to_get(base)}")

    @classmethod
    def locate(cls, root=None) -> Path:
        """The dataset's folder under the data root ``root`` (see :func:`data_root`), without reading it; raises
        :class:`MissingDataError` (saying where to get it) when it is not there."""
        return cls._locate(root)

    @classmethod
    def how_to_get(cls, root=None) -> str:
        """Where to get the files and where to put them."""
        base = data_root(root)
        return cls.manual_instructions.format(root=base / cls.name)

    def _check_counts(self):
        want = self.official.get(self.split)
        if want is None:
            return
        n_img, n_cls = want
        got_img, got_cls = len(self.labels), len(np.unique(self.labels))
        if (got_img, got_cls) != (n_img, n_cls):
            raise CountMismatchError(
                f"{self.title} split {self.split!r} in {self.root} has {got_img} images of {got_cls} "
                f"classes; the official split has {n_img} images of {n_cls} classes. The annotation "
                "files are not the original ones or some lines are lost: unpack the original archive "
                "again (strict=False skips this check).")

    def _check_files(self):
        missing = [p for p in self.paths if not p.is_file()]
        if missing:
            shown = ", ".join(str(p) for p in missing[:5])
            listed = f" listed in {' and '.join(str(f) for f in self.label_files)}" if self.label_files else ""
            raise MissingDataError(
                f"{len(missing)} of the {len(self.paths)} images{listed} for {self.title} split "
                f"{self.split!r} are missing (first: {shown}). The extraction was incomplete: unpack the "
                "archive again (or run download() again), or replace the label file if it is not the "
                "original; the dataset is not used with images left out.")

    def __len__(self) -> int:
        return len(self.paths)

    @property
    def num_classes(self) -> int:
        return int(len(np.unique(self.labels)))

    @property
    def classes(self) -> np.ndarray:
        return np.unique(self.labels)

    def load_image(self, i: int):
        """Image ``i`` as a PIL RGB image, without the transform."""
        return load_image(self.paths[i])

    def __getitem__(self, i):
        img = self.load_image(i)
        if self.transform is not None:
            img = self.transform(img)
        return img, int(self.labels[i])

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(split={self.split!r}, images={len(self)}, "
                f"classes={self.num_classes}, root={str(self.root)!r})")

    @classmethod
    def download(cls, root=None) -> Path:  # overridden where a stable address exists
        """No stable public address: raises :class:`ManualDownloadError` saying what to do."""
        raise ManualDownloadError(cls.how_to_get(root))


def _split_by_class(paths, classes_1based, first_test_class: int):
    """Zero-shot split by class id: classes < first_test_class are train."""
    classes = np.asarray(classes_1based, dtype=np.int64)
    paths = np.asarray([str(p) for p in paths], dtype=object)
    train = classes < first_test_class
    return {"train": (list(paths[train]), classes[train] - 1),
            "test": (list(paths[~train]), classes[~train] - 1)}


# ------------------------------------------------------------------------------------------------
class CUB200(RealImageDataset):
    """CUB-200-2011 (Wah et al. 2011): 11,788 bird images of 200 species.

    Zero-shot split of the papers: classes 1-100 (5,864 images) train, 101-200 (5,924) test.
    Layout: ``CUB_200_2011/`` with ``images.txt``, ``image_class_labels.txt``, ``classes.txt`` and
    ``images/``, as the official ``CUB_200_2011.tgz`` unpacks.
    """

    name = "cub200"
    title = "CUB-200-2011"
    official = {"total": 11788, "train": (5864, 100), "test": (5924, 100)}
    url = "https://data.caltech.edu/records/65de6-vp158/files/CUB_200_2011.tgz?download=1"
    md5 = "97eceeb196236b17998738112f37df78"
    manual_instructions = (
        "Run zslib.engine.data.CUB200.download(root) or get CUB_200_2011.tgz from "
        "https://www.vision.caltech.edu/datasets/cub_200_2011/ and unpack it so that "
        "{root}/CUB_200_2011/images.txt exists.")

    @classmethod
    def _candidates(cls, base):
        return [base, base / "CUB_200_2011", base / cls.name, base / cls.name / "CUB_200_2011"]

    @classmethod
    def _is_dataset_folder(cls, folder):
        return (folder / "images.txt").is_file()

    def _load_split(self, folder, split):
        f_img, f_lab, f_cls = folder / "images.txt", folder / "image_class_labels.txt", folder / "classes.txt"
        rows_img = _parse_columns(f_img, _read_lines(f_img), 2)
        rows_lab = _parse_columns(f_lab, _read_lines(f_lab), 2)
        rows_cls = _parse_columns(f_cls, _read_lines(f_cls), 2)
        img_ids, lab_ids = _int_column(f_img, rows_img, 0, "image id"), _int_column(f_lab, rows_lab, 0, "image id")
        cls_ids = _int_column(f_lab, rows_lab, 1, "class id")
        _unique_ids(f_img, img_ids)
        _unique_ids(f_lab, lab_ids)
        images = dict(zip(img_ids.tolist(), (r[1] for r in rows_img)))
        labels = dict(zip(lab_ids.tolist(), cls_ids.tolist()))
        names = dict(zip(_int_column(f_cls, rows_cls, 0, "class id").tolist(), (r[1] for r in rows_cls)))
        if set(images) != set(labels):
            only = sorted(set(images) ^ set(labels))[:5]
            raise CorruptFileError(f"{f_img} and {f_lab} list different image ids (e.g. {only}); one of "
                                   "them is truncated. Unpack the original archive again.")
        unknown = sorted(set(labels.values()) - set(names))
        if unknown:
            raise CorruptFileError(f"{f_lab} uses class ids {unknown[:5]} that {f_cls} does not name; "
                                   "unpack the original archive again.")
        ids = sorted(images)
        all_paths = [folder / "images" / images[i] for i in ids]
        self._check_labelling({f_img: all_paths}, [folder / "images"],
                              remedy=f"Unpack the original CUB_200_2011.tgz again (so that {f_img.name} and "
                                     f"{f_lab.name} are the original files), or run zslib.engine.data.CUB200.download().")
        self.label_files.append(f_lab)
        parts = _split_by_class(all_paths, [labels[i] for i in ids], 101)
        paths, lab = parts[split]
        class_names = [names[k] for k in sorted(names)]
        return paths, lab, class_names, len(ids) == self.official["total"]

    @classmethod
    def download(cls, root=None) -> Path:
        """Download (resumable, MD5-checked) and unpack ``CUB_200_2011.tgz`` into ``<root>/cub200``."""
        folder = data_root(root) / cls.name
        archive = download_url(mirrored(cls.url), folder / "CUB_200_2011.tgz", md5=cls.md5)
        if not (folder / "CUB_200_2011" / "images.txt").is_file():
            extract_archive(archive, folder)
        return folder / "CUB_200_2011"


# ------------------------------------------------------------------------------------------------
def _norm_name(name: str) -> str:
    return re.sub(r"\s+", " ", str(name).replace("/", "-").strip().lower())


class Cars196(RealImageDataset):
    """Stanford Cars (Krause et al. 2013): 16,185 images of 196 car models.

    Zero-shot split of the papers: classes 1-98 (8,054 images) train, 99-196 (8,131) test, pooling
    the official train and test halves. Three layouts are read (the official site is gone, so people
    have one of these):

    1. ``cars_annos.mat`` with ``car_ims/`` (the "all images" release);
    2. the devkit layout: ``cars_train/``, ``cars_test/``, ``devkit/cars_train_annos.mat``,
       ``cars_test_annos_withlabels.mat`` (in the folder or in ``devkit/``) and ``devkit/cars_meta.mat``;
    3. one folder per class, optionally under ``train/`` and ``test/`` (as on Kaggle). Folder names
       are either the class numbers 1..196 or the class names; names are put in the official order
       with ``names.csv`` or ``cars_meta.mat`` found next to the folders (or one or two levels up).
    """

    name = "cars196"
    title = "Cars196 (Stanford Cars)"
    official = {"total": 16185, "train": (8054, 98), "test": (8131, 98)}
    manual_instructions = (
        "Cars196 has no stable download address any more (the Stanford page is gone). Get a copy "
        "(for example the Kaggle mirrors 'stanford-cars-dataset' or 'stanford-car-dataset-by-classes-"
        "folder', or the archives car_ims.tgz + cars_annos.mat) and unpack it into {root} in one of "
        "three layouts: {root}/cars_annos.mat with {root}/car_ims/; the devkit layout "
        "{root}/cars_train/, {root}/cars_test/, {root}/devkit/cars_train_annos.mat, "
        "{root}/devkit/cars_meta.mat and cars_test_annos_withlabels.mat; or one folder per class "
        "(with names.csv or cars_meta.mat giving the official class order).")

    @classmethod
    def _candidates(cls, base):
        out = []
        for b in (base, base / cls.name):
            out += [b, b / "stanford_cars", b / "car_data", b / "car_data" / "car_data"]
        return out

    @classmethod
    def _layout(cls, folder: Path) -> str | None:
        if (folder / "cars_annos.mat").is_file():
            return "annos"
        if (folder / "devkit" / "cars_train_annos.mat").is_file():
            return "devkit"
        if cls._class_folders(folder):
            return "folders"
        return None

    @classmethod
    def _is_dataset_folder(cls, folder):
        return cls._layout(folder) is not None

    @staticmethod
    def _class_folders(folder: Path) -> list[Path]:
        roots = [folder / "train", folder / "test"] if (folder / "train").is_dir() else [folder]
        out = []
        for r in roots:
            if not r.is_dir():
                continue
            for d in sorted(r.iterdir()):
                if d.is_dir() and not d.name.startswith(".") and d.name not in ("devkit", "car_ims"):
                    out.append(d)
        if len(out) < 2:
            return []
        for d in out:  # every folder must hold images, so a data root is not mistaken for this layout
            if not any(f.suffix.lower() in _IMAGE_EXT for f in d.iterdir()):
                return []
        return out

    def _load_split(self, folder, split):
        layout = self._layout(folder)
        self.layout = layout
        remedy = ("Replace {} with the original from your Cars196 copy (download it again); if images "
                  "are missing, unpack the images again.")
        if layout == "annos":
            f = folder / "cars_annos.mat"
            mat = _loadmat(f)
            ann = _mat_key(f, mat, "annotations")
            rel = [str(p) for p in _mat_field(f, ann, "relative_im_path")]
            cls_ids = _mat_class_ids(f, _mat_field(f, ann, "class"))
            names = _class_names(f, mat["class_names"], 196) if "class_names" in mat else \
                [str(i) for i in range(1, 197)]
            paths = [folder / r for r in rel]
            tops = {Path(r).parts[0] for r in rel if len(Path(r).parts) > 1}
            self._check_labelling({f: paths}, [folder / t for t in sorted(tops | {"car_ims"})],
                                  remedy=remedy.format(f.name))
        elif layout == "devkit":
            f_tr = folder / "devkit" / "cars_train_annos.mat"
            f_te = next((p for p in (folder / "cars_test_annos_withlabels.mat",
                                     folder / "devkit" / "cars_test_annos_withlabels.mat") if p.is_file()),
                        None)
            if f_te is None:
                raise MissingDataError(
                    f"cars_test_annos_withlabels.mat is missing (looked in {folder} and {folder / 'devkit'}); "
                    "the devkit's cars_test_annos.mat has no labels. Put the labelled test annotations "
                    "there (they come with the devkit mirrors).")
            lists, ids = {}, []
            for f, sub in ((f_tr, "cars_train"), (f_te, "cars_test")):
                ann = _mat_key(f, _loadmat(f), "annotations")
                lists[f] = [folder / sub / str(n) for n in _mat_field(f, ann, "fname")]
                ids.append(_mat_class_ids(f, _mat_field(f, ann, "class")))
                self._check_labelling({f: lists[f]}, [folder / sub], remedy=remedy.format(f.name))
            paths, cls_ids = lists[f_tr] + lists[f_te], np.concatenate(ids)
            f_meta = folder / "devkit" / "cars_meta.mat"
            names = _class_names(f_meta, _mat_key(f_meta, _loadmat(f_meta), "class_names"), 196)
        else:
            paths, cls_ids, names = self._read_class_folders(folder)
        cls_ids = np.asarray(cls_ids, dtype=np.int64)
        bad = np.unique(cls_ids[(cls_ids < 1) | (cls_ids > 196)])
        if bad.size:
            raise CorruptFileError(f"{', '.join(str(f) for f in self.label_files) or folder}: class ids must lie "
                                   f"in 1..196, found {bad[:5].tolist()}; the annotations are not those of "
                                   "Cars196. Replace them with the original files.")
        p, lab = _split_by_class(paths, cls_ids, 99)[split]
        return p, lab, names, len(paths) == self.official["total"]

    def _read_class_folders(self, folder: Path):
        dirs = self._class_folders(folder)
        if all(re.fullmatch(r"[+-]?\d+(\.\d*)?", d.name) for d in dirs):  # folders named by class number
            bad = [d for d in dirs if not (d.name.isdigit() and 1 <= int(d.name) <= 196)]
            if bad:
                raise CorruptFileError(f"the class folder {bad[0]} is named {bad[0].name!r}, which is not a "
                                       "class number 1..196 (the folders of this copy are named by number); "
                                       "rename it to its class number or get an undamaged copy.")
            to_id = {d.name: int(d.name) for d in dirs}
            names = [str(i) for i in range(1, 197)]
        else:
            names = self._official_names(folder)
            index = {_norm_name(n): i + 1 for i, n in enumerate(names)}
            unknown = sorted({d.name for d in dirs if _norm_name(d.name) not in index})
            if unknown:
                raise CorruptFileError(f"class folders {unknown[:5]} in {folder} are not names from the "
                                       "official class list; rename them or fix the names file.")
            to_id = {d.name: index[_norm_name(d.name)] for d in dirs}
        paths, ids = [], []
        for d in dirs:
            for f in sorted(d.iterdir()):
                if f.suffix.lower() in _IMAGE_EXT:
                    paths.append(f)
                    ids.append(to_id[d.name])
        return paths, ids, names

    @staticmethod
    def _official_names(folder: Path) -> list[str]:
        looked = []
        for d in (folder, folder.parent, folder.parent.parent):
            for f in (d / "names.csv", d / "class_names.txt", d / "cars_meta.mat", d / "devkit" / "cars_meta.mat"):
                looked.append(str(f))
                if not f.is_file():
                    continue
                if f.suffix == ".mat":
                    return _class_names(f, _mat_key(f, _loadmat(f), "class_names"), 196)
                return _class_names(f, [ln.strip().strip('"') for ln in _read_lines(f)], 196)
        raise MissingDataError(
            f"the class folders in {folder} are named by class but the official class order (which "
            f"decides the 1-98 / 99-196 split) was not found; looked for {', '.join(looked[:4])} ... "
            "Put names.csv (196 names, one per line, official order: it ships with the Kaggle copy) "
            "or devkit/cars_meta.mat next to the class folders.")


# ------------------------------------------------------------------------------------------------
class SOP(RealImageDataset):
    """Stanford Online Products (Song et al. 2016): 120,053 images of 22,634 products.

    Zero-shot split from ``Ebay_train.txt`` (59,551 images, 11,318 classes) and ``Ebay_test.txt``
    (60,502 images, 11,316 classes). Many classes have only 2-12 images (see
    :class:`~zslib.engine.data.ClassBalancedSampler` for the small-class policy).
    """

    name = "sop"
    title = "Stanford Online Products"
    official = {"total": 120053, "train": (59551, 11318), "test": (60502, 11316)}
    url = "http://ftp.cs.stanford.edu/cs/cvgl/Stanford_Online_Products.zip"
    md5 = "7f73d41a2f44250d4779881525aea32e"
    manual_instructions = (
        "Run zslib.engine.data.SOP.download(root), or get Stanford_Online_Products.zip from "
        "https://cvgl.stanford.edu/projects/lifted_struct/ and unpack it so that "
        "{root}/Stanford_Online_Products/Ebay_train.txt exists.")

    @classmethod
    def _candidates(cls, base):
        return [base, base / "Stanford_Online_Products", base / cls.name,
                base / cls.name / "Stanford_Online_Products"]

    @classmethod
    def _is_dataset_folder(cls, folder):
        return (folder / "Ebay_train.txt").is_file()

    def _read(self, f: Path):
        lines = _read_lines(f)
        if not lines or not lines[0].lower().startswith("image_id"):
            raise CorruptFileError(f"{f} does not start with the header 'image_id class_id "
                                   "super_class_id path'; replace it with the original file.")
        rows = _parse_columns(f, lines[1:], 4, start_line=2)
        return ([r[3] for r in rows], _int_column(f, rows, 1, "class id", start_line=2),
                _int_column(f, rows, 2, "super class id", start_line=2))

    def _load_split(self, folder, split):
        # both lists are read whatever the split: together they must label every image exactly once
        files = {s: folder / f"Ebay_{s}.txt" for s in ("train", "test")}
        read = {s: self._read(f) for s, f in files.items()}
        shared = np.intersect1d(read["train"][1], read["test"][1])
        if shared.size:
            raise CorruptFileError(f"{files['train']} and {files['test']} share class ids (e.g. {int(shared[0])}); "
                                   "the zero-shot split needs disjoint classes. Replace both files with the "
                                   "originals (unpack Stanford_Online_Products.zip again).")
        rel_all = read["train"][0] + read["test"][0]
        roots = {Path(r).parts[0] for r in rel_all if len(Path(r).parts) > 1}
        roots |= {d.name for d in folder.iterdir() if d.is_dir() and d.name.endswith("_final")}
        self._check_labelling({files[s]: [folder / r for r in read[s][0]] for s in files},
                              [folder / r for r in sorted(roots)],
                              remedy="Unpack the original Stanford_Online_Products.zip again (or run "
                                     "zslib.engine.data.SOP.download()).")
        rel, cls_ids, super_ids = read[split]
        self.super_labels = super_ids - 1
        n_full = self.official[split][0]
        names = []  # SOP classes are product ids, they have no names
        return [folder / r for r in rel], cls_ids - 1, names, len(rel) == n_full

    @classmethod
    def download(cls, root=None) -> Path:
        """Download (resumable, MD5-checked) and unpack ``Stanford_Online_Products.zip`` into ``<root>/sop``."""
        folder = data_root(root) / cls.name
        archive = download_url(mirrored(cls.url), folder / "Stanford_Online_Products.zip", md5=cls.md5)
        if not (folder / "Stanford_Online_Products" / "Ebay_train.txt").is_file():
            extract_archive(archive, folder)
        return folder / "Stanford_Online_Products"


# ------------------------------------------------------------------------------------------------
class InShop(RealImageDataset):
    """DeepFashion In-Shop Clothes Retrieval (Liu et al. 2016): 52,712 images of 7,982 items.

    ``list_eval_partition.txt`` gives the splits: train (25,882 images, 3,997 items), query (14,218)
    and gallery (12,612), the last two of the same 3,985 items. Split ``"test"`` is query followed
    by gallery, with :attr:`is_query` marking the query images. Class ids: train items ``0..3996`` in
    the order of their item id, then the test items.

    Quirk: CML (TNNLS 2022, Sec. V-B) writes 28,760 test images, but query + gallery = 26,830 =
    52,712 - 25,882, which is what the partition file holds.
    """

    name = "inshop"
    title = "In-Shop Clothes Retrieval"
    splits = ("train", "query", "gallery", "test")
    official = {"total": 52712, "train": (25882, 3997), "query": (14218, 3985),
                "gallery": (12612, 3985), "test": (26830, 3985)}
    manual_instructions = (
        "In-Shop Clothes has no stable direct download (the files are on Google Drive behind the "
        "DeepFashion agreement): see http://mmlab.ie.cuhk.edu.hk/projects/DeepFashion/InShopRetrieval.html, "
        "download Img/img.zip and Eval/list_eval_partition.txt, and place them so that "
        "{root}/list_eval_partition.txt and {root}/img/ exist (unzip img.zip there).")

    @classmethod
    def _candidates(cls, base):
        out = []
        for b in (base, base / cls.name):
            out += [b, b / "Eval", b / "In-shop Clothes Retrieval Benchmark",
                    b / "In-shop Clothes Retrieval Benchmark" / "Eval"]
        return out

    @classmethod
    def _is_dataset_folder(cls, folder):
        return (folder / "list_eval_partition.txt").is_file()

    def _load_split(self, folder, split):
        f = folder / "list_eval_partition.txt"
        lines = _read_lines(f)
        if len(lines) < 2 or not lines[0].strip().isdigit():
            raise CorruptFileError(f"{f} should start with the number of images and a header line; "
                                   "replace it with the original file.")
        declared = int(lines[0])
        rows = _parse_columns(f, lines[2:], 3, start_line=3)
        if len(rows) != declared:
            raise CorruptFileError(f"{f} declares {declared} images but lists {len(rows)}; it is "
                                   "truncated. Replace it with the original file.")
        status = np.array([r[2] for r in rows])
        unknown = sorted(set(status) - {"train", "query", "gallery"})
        if unknown:
            raise CorruptFileError(f"{f}: unknown evaluation status {unknown[:3]} (expected train, query, gallery)")
        bad_item = next((k for k, r in enumerate(rows) if not re.fullmatch(r"id_\d+", r[1])), None)
        if bad_item is not None:
            raise CorruptFileError(f"{f}, line {bad_item + 3}: the item id {rows[bad_item][1]!r} is not of the "
                                   "form id_00000001; the file is damaged or not the original. Replace it "
                                   "with the original list_eval_partition.txt (download it again).")
        self._check_labelling({f: [r[0] for r in rows]}, remedy="Replace it with the original "
                              "list_eval_partition.txt (download it again).")
        items = np.array([r[1] for r in rows])
        train_items = sorted(set(items[status == "train"]))
        test_items = sorted(set(items[status != "train"]) - set(train_items))
        ids = {it: k for k, it in enumerate(train_items + test_items)}
        image_root = self._image_root(folder, rows[0][0] if rows else "img")
        keep = np.isin(status, ["query", "gallery"]) if split == "test" else status == split
        order = np.flatnonzero(keep)
        if split == "test":  # query first, then gallery
            order = np.concatenate([order[status[order] == "query"], order[status[order] == "gallery"]])
            self.is_query = status[order] == "query"
        else:
            self.is_query = np.full(len(order), split == "query")
        paths = [image_root / rows[i][0] for i in order]
        labels = [ids[items[i]] for i in order]
        return paths, labels, train_items + test_items, declared == self.official["total"]

    @staticmethod
    def _image_root(folder: Path, first: str) -> Path:
        for r in (folder, folder.parent, folder.parent / "Img", folder / "Img"):
            if (r / first).is_file():
                return r
        return folder  # the missing-file check then names the images

    def query_gallery(self):
        """For split 'test': (query indices, gallery indices)."""
        return np.flatnonzero(self.is_query), np.flatnonzero(~self.is_query)


# ------------------------------------------------------------------------------------------------
class Flowers102(RealImageDataset):
    """Oxford Flowers-102 (Nilsback & Zisserman 2008): 8,189 images of 102 flower species.

    Zero-shot protocol of Adapt-Adv (Al-Kaabi et al. 2022, Table 1): classes 1-51 train, 52-102
    test. On all 8,189 images that gives 3,493 train and 4,696 test images. (Adapt-Adv's Table 1
    reports 6,552 images, 2,807 + 3,745: the training folder of a re-packaged copy, not the full
    dataset.) Layout as the official files unpack: ``jpg/image_00001.jpg ...``, ``imagelabels.mat``
    (and ``setid.mat``, the per-image split, unused by the zero-shot protocol).
    """

    name = "flowers102"
    title = "Oxford Flowers-102"
    splits = ("train", "test", "all")
    official = {"total": 8189, "train": (3493, 51), "test": (4696, 51), "all": (8189, 102)}
    base_url = "https://www.robots.ox.ac.uk/~vgg/data/flowers/102/"
    files = {"102flowers.tgz": "52808999861908f626f3c1f4e79d11fa",
             "imagelabels.mat": "e0620be6f572b9609742df49c70aed4d",
             "setid.mat": "a5357ecc9cb78c4bef273ce3793fc85c"}
    manual_instructions = (
        "Run zslib.engine.data.Flowers102.download(root), or get 102flowers.tgz, imagelabels.mat and setid.mat "
        "from https://www.robots.ox.ac.uk/~vgg/data/flowers/102/ and place them so that "
        "{root}/imagelabels.mat and {root}/jpg/image_00001.jpg exist.")

    @classmethod
    def _candidates(cls, base):
        # "flowers-102": the folder torchvision.datasets.Flowers102 downloads into (the same three official files)
        return [base, base / cls.name, base / "102flowers", base / "oxford_flowers102", base / "flowers-102"]

    @classmethod
    def _is_dataset_folder(cls, folder):
        return (folder / "imagelabels.mat").is_file()

    def _load_split(self, folder, split):
        f = folder / "imagelabels.mat"
        labels = _mat_class_ids(f, np.atleast_1d(_mat_key(f, _loadmat(f), "labels")), "labels")
        remedy = (f"Download imagelabels.mat again (md5 {self.files['imagelabels.mat']}); if images are "
                  "missing, unpack 102flowers.tgz again (zslib.engine.data.Flowers102.download() does both).")
        if labels.size == 0 or labels.min() < 1 or labels.max() > 102:
            raise CorruptFileError(f"{f}: labels must lie in 1..102; it is not the Flowers-102 label file. "
                                   + remedy)
        paths = [folder / "jpg" / f"image_{i:05d}.jpg" for i in range(1, len(labels) + 1)]
        self._check_labelling({f: paths}, [folder / "jpg"], remedy=remedy)
        if split == "all":
            p, lab = [str(x) for x in paths], labels - 1
        else:
            p, lab = _split_by_class(paths, labels, 52)[split]
        names = [str(i) for i in range(1, 103)]
        return p, lab, names, len(labels) == self.official["total"]

    @classmethod
    def download(cls, root=None) -> Path:
        """Download (resumable, MD5-checked) the three official files into ``<root>/flowers102``."""
        folder = data_root(root) / cls.name
        for fname, md5 in cls.files.items():
            download_url(mirrored(cls.base_url + fname), folder / fname, md5=md5)
        if not (folder / "jpg" / "image_08189.jpg").is_file():
            extract_archive(folder / "102flowers.tgz", folder)
        return folder


DATASETS = {"cub200": CUB200, "cars196": Cars196, "sop": SOP, "inshop": InShop, "flowers102": Flowers102}
_ALIASES = {"cub": "cub200", "cub-200-2011": "cub200", "cub200": "cub200", "cars": "cars196",
            "cars196": "cars196", "stanford_cars": "cars196", "sop": "sop", "online_products": "sop",
            "inshop": "inshop", "in-shop": "inshop", "deepfashion": "inshop", "flowers": "flowers102",
            "flowers102": "flowers102", "oxford_flowers102": "flowers102"}


def get_dataset_class(name: str) -> type[RealImageDataset]:
    """The loader class for a dataset name such as ``'cub200'`` (aliases: 'cub', 'cars', ...)."""
    key = _ALIASES.get(str(name).strip().lower().replace(" ", "_"))
    if key is None:
        raise ValueError(f"unknown dataset {name!r}; use one of {sorted(DATASETS)} (or 'synthparts')")
    return DATASETS[key]


def open_dataset(cls, **kwargs):
    """``cls(**kwargs)``; when the dataset is not on disk and downloads are allowed (``ZS_DOWNLOAD=1``, as the
    chapters' Colab setup cell sets it), download it first (:meth:`download`: checksums, resume, progress)."""
    try:
        return cls(**kwargs)
    except MissingDataError:
        if not downloads_allowed():
            raise
    cls.download(kwargs.get("root"))
    return cls(**kwargs)
