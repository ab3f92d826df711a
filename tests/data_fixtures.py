"""Tiny on-disk trees in each real dataset's format, for the loader tests (built in tmp_path)."""
from __future__ import annotations

import http.server
import os
import threading
from pathlib import Path

import numpy as np
import scipy.io


def shared_data_dir() -> Path:
    env = os.environ.get("ZS_SHARED_DATA")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[1].parent / "shared" / "data"


class LocalServer:
    """An HTTP server on 127.0.0.1 standing in for a download address (tests never touch the network).

    Every path answers with ``payload``; a ``Range: bytes=N-`` request gets the rest from byte N with
    status 206, as a download server resuming a file does. ``ranges`` records each request's Range
    header (None when absent). Use as a context manager; ``url(name)`` is an address on it.
    """

    def __init__(self, payload: bytes = b""):
        self.payload = payload
        self.ranges: list = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                rng = self.headers.get("Range")
                owner.ranges.append(rng)
                start = int(rng.split("=")[1].split("-")[0]) if rng else 0
                body = owner.payload[start:]
                self.send_response(206 if rng else 200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self._server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self._server.server_port}/{name}"

    def __enter__(self) -> "LocalServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def write_jpeg(path: Path, seed: int, size=(20, 14)) -> Path:
    """A small JPEG whose colour depends on ``seed`` (so images differ)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    arr = (rng.uniform(0, 1, (size[1], size[0], 3)) * 255).astype(np.uint8)
    Image.fromarray(arr).save(path, quality=90)
    return path


# CUB-200-2011 ---------------------------------------------------------------------------------
CUB_CLASSES = {1: 2, 2: 3, 100: 1, 101: 2, 200: 3}  # class id -> images


def build_cub(root: Path, classes=CUB_CLASSES) -> Path:
    folder = root / "cub200" / "CUB_200_2011"
    lines_img, lines_lab = [], []
    k = 0
    for c, n in classes.items():
        for j in range(n):
            k += 1
            rel = f"{c:03d}.Bird_{c}/Bird_{c}_{j:04d}.jpg"
            write_jpeg(folder / "images" / rel, k)
            lines_img.append(f"{k} {rel}")
            lines_lab.append(f"{k} {c}")
    (folder / "images.txt").write_text("\n".join(lines_img) + "\n")
    (folder / "image_class_labels.txt").write_text("\n".join(lines_lab) + "\n")
    (folder / "classes.txt").write_text("\n".join(f"{c} {c:03d}.Bird_{c}" for c in range(1, 201)) + "\n")
    return folder


# Cars196 ----------------------------------------------------------------------------------------
CARS_SPEC = [(1, 2), (2, 1), (98, 2), (99, 1), (150, 2), (196, 2)]  # (class id, images)


def cars_names() -> list[str]:
    # not alphabetical on purpose (like the official list); one name has a slash (as 'Ram C/V')
    names = [f"Make{(i * 37) % 196:03d} Model {i}" for i in range(1, 197)]
    names[149] = "Ram C/V Cargo Van Minivan 2012"
    return names


def _struct(rows: list[dict]) -> np.ndarray:
    keys = list(rows[0])
    arr = np.zeros((1, len(rows)), dtype=[(k, object) for k in keys])
    for j, r in enumerate(rows):
        for k in keys:
            arr[0, j][k] = r[k]
    return arr


def _cars_items():
    items, k = [], 0
    for c, n in CARS_SPEC:
        for _ in range(n):
            k += 1
            items.append((k, c))
    return items


def build_cars_annos(root: Path, edit=None) -> Path:
    """``edit(rows) -> rows`` changes the annotation rows before they are saved (to damage them)."""
    folder = root / "cars196"
    rows = []
    for k, c in _cars_items():
        rel = f"car_ims/{k:06d}.jpg"
        write_jpeg(folder / rel, 100 + k)
        rows.append({"relative_im_path": rel, "bbox_x1": 1, "bbox_y1": 1, "bbox_x2": 10, "bbox_y2": 8,
                     "class": c, "test": k % 2})
    if edit is not None:
        rows = edit(rows)
    scipy.io.savemat(folder / "cars_annos.mat", {"annotations": _struct(rows),
                                                   "class_names": np.array(cars_names(), dtype=object)[None]})
    return folder


def build_cars_devkit(root: Path, labels_in_devkit: bool = False, edit=None) -> Path:
    """``edit(rows) -> rows`` changes the rows of ``cars_test_annos_withlabels.mat`` before saving."""
    folder = root / "cars196"
    train, test = [], []
    for k, c in _cars_items():
        sub, rows = ("cars_train", train) if k % 2 else ("cars_test", test)
        fname = f"{len(rows) + 1:05d}.jpg"
        write_jpeg(folder / sub / fname, 100 + k)
        rows.append({"bbox_x1": 1, "bbox_y1": 1, "bbox_x2": 10, "bbox_y2": 8, "class": c, "fname": fname})
    (folder / "devkit").mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(folder / "devkit" / "cars_train_annos.mat", {"annotations": _struct(train)})
    test_file = (folder / "devkit" if labels_in_devkit else folder) / "cars_test_annos_withlabels.mat"
    scipy.io.savemat(test_file, {"annotations": _struct(test if edit is None else edit(test))})
    scipy.io.savemat(folder / "devkit" / "cars_meta.mat",
                     {"class_names": np.array(cars_names(), dtype=object)[None]})
    return folder


def build_cars_folders(root: Path, numeric: bool = False, names_file: bool = True) -> Path:
    folder = root / "cars196" / "car_data" / "car_data"
    names = cars_names()
    for k, c in _cars_items():
        split = "train" if k % 2 else "test"
        cname = str(c) if numeric else names[c - 1].replace("/", "-")
        write_jpeg(folder / split / cname / f"{k:05d}.jpg", 100 + k)
    if names_file and not numeric:
        (root / "cars196" / "names.csv").write_text("\n".join(names) + "\n")
    return folder


# Stanford Online Products -------------------------------------------------------------------------
SOP_TRAIN = [(1, 1, 2), (2, 1, 3), (3, 2, 1)]  # (class id, super class id, images)
SOP_TEST = [(11319, 1, 2), (11320, 3, 2)]


def build_sop(root: Path) -> Path:
    folder = root / "sop" / "Stanford_Online_Products"
    k = 0
    for fname, spec in (("Ebay_train.txt", SOP_TRAIN), ("Ebay_test.txt", SOP_TEST)):
        lines = ["image_id class_id super_class_id path"]
        for c, s, n in spec:
            for j in range(n):
                k += 1
                rel = f"super{s}_final/{c}_{j}.JPG"
                write_jpeg(folder / rel, 300 + k)
                lines.append(f"{k} {c} {s} {rel}")
        (folder / fname).write_text("\n".join(lines) + "\n")
    return folder


# In-Shop --------------------------------------------------------------------------------------------
INSHOP_ROWS = [  # (item id, status)
    ("id_00000002", "train"), ("id_00000002", "train"), ("id_00000005", "train"),
    ("id_00000001", "query"), ("id_00000001", "gallery"), ("id_00000001", "gallery"),
    ("id_00000007", "query"), ("id_00000007", "query"), ("id_00000007", "gallery"),
]


def build_inshop(root: Path, declared: int | None = None) -> Path:
    folder = root / "inshop"
    lines = [str(len(INSHOP_ROWS) if declared is None else declared), "image_name item_id evaluation_status"]
    for k, (item, status) in enumerate(INSHOP_ROWS):
        rel = f"img/WOMEN/Dresses/{item}/{k:02d}_1_front.jpg"
        write_jpeg(folder / rel, 500 + k)
        lines.append(f"{rel} {item} {status}")
    (folder / "list_eval_partition.txt").write_text("\n".join(lines) + "\n")
    return folder


# Flowers-102 --------------------------------------------------------------------------------------
FLOWERS_LABELS = [1, 51, 52, 102, 1, 77, 51]


def build_flowers(root: Path, labels=FLOWERS_LABELS, stored_labels=None) -> Path:
    """One image per entry of ``labels``; ``imagelabels.mat`` holds ``stored_labels`` when given (to
    damage it), else ``labels`` as a (1, n) uint8 row like the official file."""
    folder = root / "flowers102"
    for i, _ in enumerate(labels, start=1):
        write_jpeg(folder / "jpg" / f"image_{i:05d}.jpg", 700 + i)
    stored = np.array(labels, dtype=np.uint8)[None] if stored_labels is None else stored_labels
    scipy.io.savemat(folder / "imagelabels.mat", {"labels": stored})
    scipy.io.savemat(folder / "setid.mat", {"trnid": np.array([[1]]), "valid": np.array([[2]]),
                                            "tstid": np.arange(3, len(labels) + 1)[None]})
    return folder
