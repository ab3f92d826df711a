"""zslib as a reader gets it from ``pip install``: the wheel of this checkout, installed (not editable) into a
virtual environment of its own, used from a folder outside the checkout.

What a Colab reader runs differs from a checkout in ways only an install shows: zslib finds its recorded runs
and chapters where the wheel put them (``<prefix>/share/zslib/``, not ``results/recorded/`` and ``book/``), and
every default folder that a checkout keeps inside itself (``results/``, ``data/``) lies elsewhere. The book
build (scripts/build_book.py) executes the chapters in such an environment, and so can this script:

    .venv/bin/python scripts/reader_env.py book/cml.ipynb book/compare.ipynb [--away DIR] [--save DIR]

* :func:`build_wheel` builds the wheel from the files a clone of the repository holds (tracked, or new and not
  ignored; copied to a scratch folder first, so nothing left over in ``build/`` can slip into it), as
  ``pip install git+URL`` would;
* :func:`create_env` makes the environment: its own ``site-packages`` first, then the running environment's
  (torch, numpy, Jupyter: nothing is downloaded) through a ``.pth`` file, whose editable zslib is not reached
  (a ``.pth`` file in a folder that another ``.pth`` file names is not processed); a kernelspec ``python3`` that
  runs the environment's Python;
* :func:`install` installs the wheel without dependencies and :func:`installed_from` checks, from a folder
  outside the checkout, that ``import zslib`` finds the installed copy.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import site
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

#: Variables of the caller that would point an installed zslib back at the checkout.
CHECKOUT_VARIABLES = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")


def reader_environ(env_dir: Path, base: dict | None = None) -> dict:
    """The caller's environment (``base``, default ``os.environ``) without what points at the checkout, with the
    environment's ``bin/`` first on ``PATH``, its kernelspecs first for Jupyter and the current folder left off
    ``sys.path`` (Python 3.11's ``PYTHONSAFEPATH``)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in CHECKOUT_VARIABLES}
    env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["JUPYTER_PATH"] = str(env_dir / "share" / "jupyter")
    env["PYTHONSAFEPATH"] = "1"  # `python -m`/`-c` in a checkout's folder must not import the checkout's zslib
    return env


def source_files(root: Path) -> list[str]:
    """The files a clone of ``root`` holds: tracked, or new and not ignored (``git ls-files``); without git,
    every file but the ignored build and environment folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=root,
                             capture_output=True, text=True, check=True).stdout
        return sorted({p for p in out.split("\0") if p and (root / p).is_file()})
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "_build", "build", "data", ".vendor"}
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                      if p.is_file() and not skip & set(p.relative_to(root).parts[:1]))


def build_wheel(root: Path, out_dir: Path, python: str = sys.executable) -> Path:
    """Build the wheel of the project at ``root`` into ``out_dir`` (replacing an older one) and return it."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="zslib-src-") as tmp:
        src = Path(tmp) / "src"
        for rel in source_files(root):
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / rel, src / rel)
        proc = subprocess.run([python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                               "--disable-pip-version-check", "-w", str(out_dir), str(src)],
                              capture_output=True, text=True, cwd=tmp)
    if proc.returncode != 0:
        raise RuntimeError(f"building the wheel of {root} failed:\n{proc.stderr[-3000:]}")
    (wheel,) = out_dir.glob("*.whl")
    return wheel


def create_env(env_dir: Path, parent_paths: list[str] | None = None) -> Path:
    """A fresh virtual environment at ``env_dir`` whose Python also sees ``parent_paths`` (default: the running
    environment's site-packages), after its own; returns its Python."""
    if env_dir.exists():
        shutil.rmtree(env_dir)
    venv.EnvBuilder(system_site_packages=False, with_pip=False, symlinks=os.name != "nt").create(env_dir)
    python = env_dir / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = parent_paths if parent_paths is not None else [p for p in site.getsitepackages() if Path(p).is_dir()]
    (Path(purelib) / "_parent_env.pth").write_text("".join(f"{p}\n" for p in parents))
    kernel = env_dir / "share" / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True, exist_ok=True)
    (kernel / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (zslib installed from its wheel)", "language": "python"}, indent=1))
    return python


def install(wheel: Path, python: Path, env: dict) -> None:
    """Install ``wheel`` into the environment of ``python`` (no dependencies: they come from the parent)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index",
                           "--disable-pip-version-check", "-q", str(wheel)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"installing {wheel.name} failed:\n{proc.stderr[-3000:]}")


WHERE = r"""
import json, zslib
from jupyter_client.kernelspec import KernelSpecManager
from zslib.engine.profile import repository_root
from zslib.engine.store import recorded_dir
print(json.dumps({"zslib": zslib.__file__, "checkout": str(repository_root()), "recorded": str(recorded_dir()),
                  "kernel": KernelSpecManager().get_kernel_spec("python3").argv[0]}))
"""


def installed_from(python: Path, env: dict, away: Path) -> dict:
    """Where the environment's zslib, recorded runs and ``python3`` kernel are, asked from the folder ``away``;
    raises unless zslib and the kernel are the environment's own."""
    proc = subprocess.run([str(python), "-c", WHERE], capture_output=True, text=True, env=env, cwd=away)
    if proc.returncode != 0:
        raise RuntimeError(f"the installed zslib does not import:\n{proc.stderr[-3000:]}")
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    prefix = python.parent.parent.resolve()
    if not Path(found["zslib"]).resolve().is_relative_to(prefix) or found["checkout"] != "None":
        raise RuntimeError(f"the environment imports zslib from {found['zslib']}, not from its own install")
    if Path(found["kernel"]) != python:
        raise RuntimeError(f"the kernel python3 runs {found['kernel']}, not {python}")
    return found


def reader_env(root: Path, folder: Path, base_env: dict | None = None) -> tuple[Path, dict, dict]:
    """Build the wheel of ``root``, install it into ``folder/env`` and check it from ``folder/away``: returns the
    environment's Python, its environment variables and :func:`installed_from`'s answer (with the seconds each
    step took)."""
    folder.mkdir(parents=True, exist_ok=True)
    times = {}
    t = time.perf_counter()
    wheel = build_wheel(root, folder / "wheel")
    times["wheel_seconds"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    python = create_env(folder / "env")
    env = reader_environ(folder / "env", base_env)
    install(wheel, python, env)
    times["install_seconds"] = round(time.perf_counter() - t, 1)
    (folder / "away").mkdir(exist_ok=True)
    found = installed_from(python, env, folder / "away")
    return python, env, {**found, **times, "wheel": wheel.name}


RUN = r"""
import sys, time, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError
path, cwd, save = sys.argv[1:4]
nb = nbformat.read(path, as_version=4)
start = time.perf_counter()
try:
    NotebookClient(nb, timeout=1800, kernel_name="python3", resources={"metadata": {"path": cwd}}).execute()
    status = 0
except CellExecutionError as err:
    print(str(err)[-4000:], file=sys.stderr)
    status = 1
if save:
    nbformat.write(nb, save)
print(f"{path}: {'ok' if status == 0 else 'FAILED'} in {time.perf_counter() - start:.1f} s")
sys.exit(status)
"""


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="chapters to execute with the installed zslib")
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--folder", help="where the wheel, the environment and the away folder go "
                                         "(default: a temporary folder)")
    parser.add_argument("--save", help="folder for the executed copies of the chapters")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    folder = Path(args.folder).resolve() if args.folder else Path(tempfile.mkdtemp(prefix="zslib-reader-"))
    python, env, found = reader_env(root, folder)
    print(json.dumps(found, indent=1))
    env.setdefault("ZS_PROGRESS", "none")
    env.setdefault("ZS_EXPLORERS", "static")
    failed = 0
    for name in args.notebooks:
        save = str(Path(args.save).resolve() / Path(name).name) if args.save else ""
        if save:
            Path(save).parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run([str(python), "-c", RUN, str(Path(name).resolve()), str(folder / "away"), save],
                              env=env, cwd=folder / "away")
        failed += proc.returncode != 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
