"""Four failures that each said something other than what was wrong, each now one line with what to do.

A truncated JPEG met while building the image cache lost its file name in the DataLoader worker's report; a batch of
16 x 400 images gave torch's request for 262 GB; a write stopped by the file-size limit (ulimit -f) was reported as a
full disk; an unreadable checkpoint repeated torch's advice to load it with weights_only=False.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from data_fixtures import build_flowers

LABELS = [c for c in (1, 2, 3, 52, 53, 54) for _ in range(4)]


@pytest.mark.parametrize("keep", [0.6, 200])  # the header intact (decoded in a worker), or cut inside it
def test_a_truncated_jpeg_met_by_the_image_cache_is_named(tmp_path, monkeypatch, keep):
    from zslib.engine.data import CorruptFileError, Flowers102, cached

    monkeypatch.setenv("ZS_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZS_CACHE", str(tmp_path / "cache"))
    folder = build_flowers(tmp_path / "data", LABELS)
    bad = folder / "jpg" / "image_00003.jpg"
    data = bad.read_bytes()
    bad.write_bytes(data[:int(keep * len(data)) if keep < 1 else keep])
    with pytest.raises(CorruptFileError) as err:
        cached(Flowers102(split="train"), 16, num_workers=1, progress=False)  # decoded in a worker process
    line = str(err.value)
    assert "\n" not in line and str(bad) in line and "truncated" in line  # before: "Caught CorruptFileError in ..."
    assert not list((tmp_path / "cache").glob("preresized-*"))  # nothing half-built is left as a cache


def test_a_batch_that_does_not_fit_in_memory_names_the_batch(tmp_path):
    from zslib.engine.config import Config
    from zslib.engine.out_of_memory import BatchMemoryError, batch_memory_hint

    config = Config(batch_classes=16, batch_per_class=400)
    torch_says = ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you "
                  "tried to allocate 262144000000 bytes. Error code 12 (Cannot allocate memory)")
    with pytest.raises(BatchMemoryError) as err, batch_memory_hint(config):
        raise RuntimeError(torch_says)
    line = str(err.value)
    assert "16 classes x 400 images = 6400 images" in line and "262 GB" in line and "--batch-per-class" in line
    assert isinstance(err.value, RuntimeError) and isinstance(err.value, MemoryError)
    with pytest.raises(ValueError, match="other"), batch_memory_hint(config):
        raise ValueError("other")  # anything else passes through


def _heuristic_overcommit_refuses(nbytes: int) -> bool:
    try:
        mode = Path("/proc/sys/vm/overcommit_memory").read_text().strip()
        total = sum(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                    if line.startswith(("MemTotal:", "SwapTotal:")))
    except OSError:
        return False
    return mode == "0" and nbytes > 2 * total


@pytest.mark.skipif(not _heuristic_overcommit_refuses(262144000000),
                    reason="only where the kernel refuses a 262 GB allocation at once (heuristic overcommit)")
def test_batch_per_class_400_on_the_command_line_gives_the_hint(tmp_path, capsys):
    from zslib.__main__ import main

    code = main(["train", "--batch-per-class", "400", "--iterations", "2", "--results-dir", str(tmp_path),
                 "--progress", "none"])
    err = capsys.readouterr().err
    assert code == 2 and "16 classes x 400 images" in err and "lower --batch-per-class" in err
    assert "DefaultCPUAllocator" not in err


def test_a_file_size_limit_is_not_reported_as_a_full_disk(tmp_path):
    """In a child process limited to 20 kB files (``ulimit -f``), a checkpoint and a result file cannot be written."""
    script = (
        "import resource, torch\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (20000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
        "from zslib.engine.train.checkpoint import save_checkpoint\n"
        "from zslib.engine.store import write_json\n"
        f"for write in (lambda: save_checkpoint({str(tmp_path / 'c.pt')!r}, {{'x': torch.zeros(100000)}}),\n"
        f"              lambda: write_json({str(tmp_path / 'r.json')!r}, {{'a': list(range(100000))}})):\n"
        "    try:\n"
        "        write()\n"
        "    except OSError as err:\n"
        "        print(err)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    lines = out.stdout.strip().splitlines()
    assert len(lines) == 2, out.stderr
    for line in lines:
        assert "file-size limit" in line and "20,000 bytes" in line and "ulimit -f unlimited" in line
        assert "disk is full" not in line
    assert not list(tmp_path.iterdir())  # no half-written file left behind


def test_a_full_disk_is_still_reported_as_one(tmp_path):
    import errno

    from zslib.engine.train.checkpoint import atomic_write

    def full(f):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="the disk is full"):
        atomic_write(tmp_path / "x.bin", full)


@pytest.mark.parametrize("content", [b"hello world, not a checkpoint", bytes(range(256)) * 12])
def test_a_garbage_checkpoint_does_not_repeat_torchs_advice(tmp_path, content):
    import pickle

    from zslib.engine.train.checkpoint import load_checkpoint

    path = tmp_path / "run.pt"
    path.write_bytes(content)
    with pytest.raises(RuntimeError) as err:
        load_checkpoint(path)
    line = str(err.value)
    assert str(path) in line and "delete it" in line and "\n" not in line
    assert "weights_only" not in line and "trusted source" not in line
    pickle.dump({"a": Path("x")}, path.open("wb"))  # a pickle of something that is not tensors
    with pytest.raises(RuntimeError) as err:
        load_checkpoint(path)
    assert "weights_only" not in str(err.value) and "not the tensors and plain values" in str(err.value)
