"""Build the executed book into _build/html and report on each chapter.

Used by `make book` and by the integration test (tests/test_book.py). It runs Jupyter Book with
warnings as errors, then reads the execution cache to report, per chapter, whether it executed and
how long it took. What it adds to a plain `jupyter-book build`:

* **Failures that say what to do.** A failing chapter is named with the failing cell (its number and
  first line), the end of its traceback and the remedy (a timed-out cell: which variable gives more
  time). The exit status is non-zero. Chapters that succeeded stay in the execution cache, so the next
  build re-executes only what failed or changed.
* **A cache that cannot go stale.** The execution cache keys a chapter by its own source; a chapter's
  output also depends on zslib, on the pinned packages and on the recorded runs (results/recorded/, which
  chapters and the "Recorded runs" page show). When their fingerprint changed since the last build, every
  chapter is executed again (stored runs in results/ are still reused).
* **The chapters as a reader runs them.** By default (``--zslib wheel``, for the book's own checkout) zslib's
  wheel is built from the files a clone holds and installed, not editable, into a virtual environment of its
  own (``_build/reader/env``, scripts/reader_env.py); the chapters execute in its kernel with the recorded runs
  and chapters the wheel carries and a results folder outside the checkout's ``results/``
  (``_build/reader/results`` unless ``ZS_RESULTS`` says otherwise), so a chapter that breaks on a pip install
  (on Colab) fails the build. ``--zslib checkout`` executes them with the running Python's zslib instead.
* **Times that mean something on a shared machine.** A short fixed workload (:data:`CALIBRATION`) is
  timed before and after the build and compared with its time on the reference machine (the speed
  factor), and a monitor samples, every two seconds, how many other programs competed for the CPU. The
  report ``_build/build_report.json`` gives each chapter's wall time, its time scaled to the reference
  machine (a slower machine's time divided by the factor; a faster machine's time as measured, since the budget is
  wall time on the machine and a short convolution benchmark overstates how much faster a whole chapter runs),
  and how busy the machine was meanwhile; ``_build/execution_times.json`` keeps the plain
  seconds. Nothing is killed for being slow: the per-cell timeout is generous (``ZS_CELL_TIMEOUT``,
  default :data:`DEFAULT_CELL_TIMEOUT` s) and the budget is checked by the tests from the report.

    python scripts/build_book.py [--root .] [--builder html] [--zslib wheel|checkout]
"""
from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

CHAPTER_BUDGET_S = 180  # quick profile, idle 2-core reference machine
BOOK_BUDGET_S = 40 * 60
DEFAULT_CELL_TIMEOUT = 1800  # seconds; the slowest quick-profile cell takes about 2 minutes

# The calibration workload: 40 training steps of the quick profile's SmallCNN on a 64-image batch of 48-px
# images, one thread (as each worker of a grid trains). REFERENCE_SECONDS is its median time on the
# project's reference machine: 2 cores (AMD EPYC, KVM), 24 GiB, idle, 2026-11-23 (five measurements
# between 0.90 and 1.25 s).
REFERENCE_SECONDS = 1.0
CALIBRATION = r"""
import time, torch
torch.set_num_threads(1)
from zslib.engine.models import build_model
torch.manual_seed(0)
net = build_model("smallcnn", 64, widths=[16, 32, 64, 128]).to(memory_format=torch.channels_last)
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
x = torch.rand(64, 3, 48, 48).contiguous(memory_format=torch.channels_last)
def step():
    loss = net(x).pow(2).sum()
    opt.zero_grad(); loss.backward(); opt.step()
for _ in range(5):
    step()
times = []
for _ in range(3):
    t = time.perf_counter()
    for _ in range(40):
        step()
    times.append(time.perf_counter() - t)
print(sorted(times)[1])
"""


#: The committed record of the chapters' last measured times (zslib.teaching.path.COMPUTE_RECORD), relative to root.
COMPUTE_RECORD = Path("zslib") / "teaching" / "compute_times.json"


def compute_record(report: dict, date: str, profile: str) -> dict | None:
    """The record of :data:`COMPUTE_RECORD` from a build's report: each chapter's seconds, the date and the machine;
    ``None`` (keep the old record) unless the build ran the quick profile and every chapter has a time and none
    failed, so that one record never mixes builds."""
    chapters = report.get("chapters", {})
    if profile != "quick" or not chapters or any(e.get("seconds") is None or e.get("status") == "FAILED"
                                                  for e in chapters.values()):
        return None
    machine = report.get("machine", {})
    return {"measured": date,
            "how": (f"scripts/build_book.py, quick profile, {machine.get('cpus', '?')} CPUs"
                    + (f", calibration {report['speed_factor']:.2f} times the reference machine's time"
                       if report.get("speed_factor") else "")),
            "chapters": {Path(name).stem: round(float(e["seconds"]), 1) for name, e in sorted(chapters.items())}}


# ----------------------------------------------------------------------------------------------------
# Machine speed and load


def calibrate(python: str = sys.executable) -> float | None:
    """Seconds the calibration workload takes now (``None`` if it could not run)."""
    try:
        out = subprocess.run([python, "-c", CALIBRATION], capture_output=True, text=True, timeout=600)
        return float(out.stdout.strip().splitlines()[-1])
    except Exception:
        return None


def _proc_stat() -> tuple[int, int, int]:
    """(procs_running, total jiffies, steal jiffies) from /proc/stat."""
    running, total, steal = 0, 0, 0
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                parts = [int(v) for v in line.split()[1:]]
                total, steal = sum(parts), parts[7] if len(parts) > 7 else 0
            elif line.startswith("procs_running"):
                running = int(line.split()[1])
    return running, total, steal


def _stat_fields(path: str) -> list[str] | None:
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()  # the fields after "pid (comm)"


def _running_in_tree(root_pid: int) -> int:
    """How many threads of the process tree rooted at ``root_pid`` are runnable (state R) now: the
    same unit as /proc/stat's ``procs_running``."""
    parent = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            fields = _stat_fields(f"/proc/{entry.name}/stat")
            if fields is not None:
                parent[int(entry.name)] = int(fields[1])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    count, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            tids = []
        for tid in tids:
            fields = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
            count += fields is not None and fields[0] == "R"
        todo.extend(children.get(pid, ()))
    return count


class LoadMonitor(threading.Thread):
    """Samples every ``every`` seconds how many runnable processes do not belong to this build, and
    the share of CPU time the hypervisor took away (steal). Linux only; elsewhere it records nothing."""

    def __init__(self, every: float = 2.0):
        super().__init__(daemon=True)
        self.every, self.samples, self._halt = every, [], threading.Event()
        self.available = Path("/proc/stat").exists()

    def run(self):
        if not self.available:
            return
        _, total0, steal0 = _proc_stat()
        while not self._halt.wait(self.every):
            try:
                running, total, steal = _proc_stat()
                ours = _running_in_tree(os.getpid())  # includes this sampling thread's process
                other = max(0, running - ours)
                share = (steal - steal0) / (total - total0) if total > total0 else 0.0
                total0, steal0 = total, steal
                self.samples.append({"t": time.time(), "other_running": other, "steal": round(share, 4)})
            except Exception:
                continue

    def stop(self):
        self._halt.set()
        self.join(timeout=10)

    def busy_between(self, start: float, end: float) -> dict | None:
        """Mean number of other runnable processes and mean steal share over ``[start, end]``."""
        rows = [s for s in self.samples if start <= s["t"] <= end]
        if not rows:
            return None
        return {"other_running": round(statistics.fmean(r["other_running"] for r in rows), 3),
                "steal": round(statistics.fmean(r["steal"] for r in rows), 4), "samples": len(rows)}


# ----------------------------------------------------------------------------------------------------
# The execution cache: stale detection and per-chapter records


def fingerprint(root: Path, zslib_from: str = "checkout") -> str:
    """SHA-256 over what a chapter's output depends on besides its own source: zslib's code, the pinned
    environment, the recorded runs and where the chapters take zslib from (``zslib_from``)."""
    h = hashlib.sha256(zslib_from.encode())
    files = (sorted((root / "zslib").rglob("*.py")) + [root / "constraints.txt", root / "pyproject.toml"]
             + sorted((root / "results" / "recorded").rglob("*.json")))  # runs and analyses/
    for f in files:
        if f.is_file():
            h.update(f.relative_to(root).as_posix().encode())
            h.update(f.read_bytes())
    h.update(sys.version.encode())
    return h.hexdigest()


def invalidate_if_stale(root: Path, zslib_from: str = "checkout") -> bool:
    """Drop the execution cache when zslib, the environment or the recorded runs changed since it was
    written, and Sphinx's saved environment with it: Sphinx re-reads only pages whose source changed, so with
    the environment kept, an unchanged chapter would be neither read nor executed again and its page would keep
    the old outputs."""
    stamp = root / "_build" / ".zslib_fingerprint"
    cache = root / "_build" / ".jupyter_cache"
    now = fingerprint(root, zslib_from)
    stale = cache.exists() and (not stamp.exists() or stamp.read_text().strip() != now)
    if stale:
        shutil.rmtree(cache)
        shutil.rmtree(root / "_build" / ".doctrees", ignore_errors=True)
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(now)
    return stale


def chapter_records(root: Path) -> list[dict]:
    """One dict per notebook the cache knows: path, executed?, seconds, end time, traceback."""
    from jupyter_cache import get_cache

    cache_dir = root / "_build" / ".jupyter_cache"
    if not cache_dir.exists():
        return []
    cache = get_cache(cache_dir)
    rows = []
    for record in cache.list_project_records():
        path = Path(record.uri)
        try:
            rel = path.resolve().relative_to(root.resolve())
        except ValueError:
            rel = path
        cached = cache.get_cached_project_nb(record.uri)
        ended = None
        if cached is not None and cached.created is not None:
            ended = cached.created.replace(tzinfo=dt.timezone.utc).timestamp()  # jupyter-cache stores UTC
        rows.append(
            {
                "chapter": rel.as_posix(),
                "path": path,
                "executed": cached is not None and not record.traceback,
                "seconds": (cached.data or {}).get("execution_seconds") if cached is not None else None,
                "ended": ended,
                "traceback": record.traceback,
            }
        )
    return sorted(rows, key=lambda r: r["chapter"])


# ----------------------------------------------------------------------------------------------------
# Failure messages


def last_lines(text: str, n: int = 12) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return "\n".join("      " + ln for ln in lines[-n:])


def failing_cell(notebook: Path, traceback: str) -> tuple[int, str] | None:
    """(number among the code cells, counting from 1; first line) of the cell the traceback quotes."""
    import nbformat

    m = re.search(r"(?:the following cell|preview of the cell contents):\s*\n-+\n(.*?)\n-+\n", traceback or "", re.S)
    if not m or not notebook.exists():
        return None
    quoted = m.group(1).strip()
    head = quoted.splitlines()[0].strip() if quoted else ""
    code = [c.source for c in nbformat.read(notebook, as_version=4).cells if c.cell_type == "code"]
    for i, src in enumerate(code, start=1):
        if src.strip() == quoted or (head and src.strip().startswith(quoted[:200])):
            return i, head
    return None


def remedy(traceback: str, timeout: int) -> str:
    if "CellTimeoutError" in (traceback or "") or "timed out" in (traceback or ""):
        return (f"the cell ran longer than the cell timeout ({timeout} s). On a slow or busy machine give it more "
                f"time, e.g. `ZS_CELL_TIMEOUT={4 * timeout} make book`; chapters that succeeded are not executed again.")
    return ("fix the error above (run the notebook in Jupyter to see it in context), then `make book` again: "
            "only this chapter and chapters that changed are executed again.")


# ----------------------------------------------------------------------------------------------------
# The build


def effective_config(root: Path, timeout: int) -> Path | None:
    """A copy of _config.yml with ``execute.timeout`` replaced, when it differs from the file's; the copy
    sits in the book root (hidden, excluded from the book) so that relative paths keep their meaning."""
    import yaml

    config = yaml.safe_load((root / "_config.yml").read_text()) or {}
    execute = config.setdefault("execute", {})
    if execute.get("timeout") == timeout:
        return None
    execute["timeout"] = timeout
    path = root / ".build_config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def cell_timeout(root: Path) -> int:
    env = os.environ.get("ZS_CELL_TIMEOUT", "").strip()
    if env:
        if not env.lstrip("-").isdigit() or int(env) == 0:
            raise SystemExit(f"ZS_CELL_TIMEOUT={env!r} must be a whole number of seconds (or -1 for no limit)")
        return int(env)
    import yaml

    return int((yaml.safe_load((root / "_config.yml").read_text()) or {}).get("execute", {}).get(
        "timeout", DEFAULT_CELL_TIMEOUT))


def _reader_env_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("reader_env", Path(__file__).with_name("reader_env.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHECKOUT_FOLDERS = r"""
import json
from zslib.engine.cache import cache_dir
from zslib.engine.data import data_root
print(json.dumps({"ZS_DATA": str(data_root()), "ZS_CACHE": str(cache_dir() or "off")}))
"""


def reader_setup(root: Path, project: Path | None = None) -> tuple[str, dict, dict]:
    """(Python, environment variables, facts) for executing the chapters of the book at ``root`` with zslib
    installed from the wheel of ``project`` (default ``root``; scripts/reader_env.py) into ``_build/reader/env``.
    The data and cache folders stay those of the checkout (``data/``, ``data/cache``) unless the caller set
    ``ZS_DATA`` / ``ZS_CACHE``: where a reader keeps the photographs is not what this build checks, and the real
    profile's feature cache takes minutes to build."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    project = root if project is None else project
    out = subprocess.run([sys.executable, "-c", CHECKOUT_FOLDERS], cwd=project, env=env, capture_output=True,
                         text=True)
    if out.returncode != 0:
        raise SystemExit(f"cannot import zslib from {project}:\n{out.stderr[-2000:]}")
    for name, value in json.loads(out.stdout.strip().splitlines()[-1]).items():
        if not env.get(name, "").strip():
            env[name] = value
    folder = root / "_build" / "reader"
    env.setdefault("ZS_RESULTS", str(folder / "results"))
    python, env, facts = _reader_env_module().reader_env(project, folder, env)
    return str(python), env, facts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--builder", default="html")
    parser.add_argument("--no-calibration", action="store_true", help="skip the speed measurement")
    parser.add_argument("--zslib", choices=["wheel", "checkout"],
                        help="wheel: execute the chapters with zslib installed from the wheel of ROOT, as a reader "
                             "installs it (default when ROOT is the book's checkout); checkout: with the running "
                             "Python's zslib (default for any other book)")
    parser.add_argument("--project", help="with --zslib wheel: the zslib checkout whose wheel is built (default ROOT)")
    args = parser.parse_args(argv)
    root = Path(args.root).resolve()
    zslib_from = args.zslib or ("wheel" if (root / "pyproject.toml").is_file() and (root / "zslib").is_dir()
                                else "checkout")
    os.environ.setdefault("ZS_PROFILE", "quick")
    # No training progress on the pages: a reader of the static book sees results, not progress bars.
    os.environ.setdefault("ZS_PROGRESS", "none")
    # The interactive explorers as their static view only: no live widget whose state the page would carry.
    os.environ.setdefault("ZS_EXPLORERS", "static")
    (root / "_build").mkdir(exist_ok=True)
    python, env, reader = sys.executable, dict(os.environ), None
    if zslib_from == "wheel":
        python, env, reader = reader_setup(root, Path(args.project).resolve() if args.project else None)
        print(f"zslib installed from its wheel ({reader['wheel']}: built in {reader['wheel_seconds']} s, installed in "
              f"{reader['install_seconds']} s) into {Path(python).parent.parent}; the chapters execute with it, "
              f"results in {env['ZS_RESULTS']}", flush=True)

    if invalidate_if_stale(root, zslib_from):
        print("zslib, the pinned environment or the recorded runs changed since the last build: every chapter "
              "is executed again (stored runs in results/ are reused).", flush=True)
    findings = root / "book" / "_findings.md"
    if findings.is_file():  # the index's main findings, generated from the recorded runs of this checkout
        subprocess.run([python, "-m", "zslib.methods.book_findings", str(findings)], check=True, env=env,
                       cwd=root if reader is None else root / "_build" / "reader" / "away")
    timeout = cell_timeout(root)
    config_path = effective_config(root, timeout)
    calibration = {"before": None if args.no_calibration else calibrate()}
    monitor = LoadMonitor()
    monitor.start()

    if reader is None:
        jb = Path(sys.executable).with_name("jupyter-book")
        cmd = [str(jb if jb.exists() else "jupyter-book")]
    else:  # jupyter-book in the reader's environment: its kernel python3 is that environment's Python
        cmd = [python, "-c", "import sys; from jupyter_book.cli.main import main; sys.argv[0] = 'jupyter-book'; "
                             "sys.exit(main())"]
    cmd += ["build", str(root), "--builder", args.builder, "--warningiserror", "--keep-going"]
    if config_path is not None:
        cmd += ["--config", str(config_path)]
    print("$", " ".join(cmd), flush=True)
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    finally:
        if config_path is not None:
            config_path.unlink(missing_ok=True)
    wall = time.perf_counter() - start
    monitor.stop()
    calibration["after"] = None if args.no_calibration else calibrate()
    log = proc.stdout
    print(log, flush=True)
    (root / "_build" / "build.log").write_text(log)

    rows = chapter_records(root)
    failed = [r for r in rows if r["traceback"]]
    measured = [v for v in calibration.values() if v]
    factor = max(measured) / REFERENCE_SECONDS if measured else None
    allowance = max(factor, 1.0) if factor else None  # the time a chapter is judged by: see the module's docstring
    report = {"budget_seconds": CHAPTER_BUDGET_S, "book_budget_seconds": BOOK_BUDGET_S,
              "reference_seconds": REFERENCE_SECONDS, "calibration_seconds": calibration, "speed_factor": factor,
              "allowance_factor": allowance,
              "machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                          "python": platform.python_version()},
              "load_monitor": monitor.available, "wall_seconds": round(wall, 1),
              "zslib": {"from": zslib_from, **(reader or {})}, "chapters": {}}
    for r in rows:
        entry = {"seconds": r["seconds"], "status": "FAILED" if r["traceback"] else "ok" if r["executed"] else "-"}
        if r["seconds"] is not None and r["ended"] is not None:
            entry["busy"] = monitor.busy_between(r["ended"] - r["seconds"], r["ended"])
        if r["seconds"] is not None and allowance:
            entry["scaled_seconds"] = round(r["seconds"] / allowance, 1)
        report["chapters"][r["chapter"]] = entry
    (root / "_build" / "build_report.json").write_text(json.dumps(report, indent=1))
    (root / "_build" / "execution_times.json").write_text(
        json.dumps({r["chapter"]: r["seconds"] for r in rows}, indent=2))
    record = compute_record(report, dt.date.today().isoformat(), os.environ.get("ZS_PROFILE", "quick"))
    if record is not None and (root / COMPUTE_RECORD).parent.is_dir():  # a book without zslib keeps no record
        (root / COMPUTE_RECORD).write_text(json.dumps(record, indent=1) + "\n")
        print(f"Chapter times recorded in {COMPUTE_RECORD} (the chapter cards of a clean clone read them; commit it).")

    print("\nChapter execution (quick profile unless ZS_PROFILE says otherwise):")
    if factor:
        print(f"  speed: the calibration workload took {', '.join(f'{v:.2f} s' for v in measured)} "
              f"(reference machine {REFERENCE_SECONDS:.2f} s): this machine ran {factor:.2f}x the reference time")
    print(f"  {'seconds':>8s}  {'scaled':>7s}  {'other load':>10s}  status  chapter")
    for chapter, e in report["chapters"].items():
        sec = f"{e['seconds']:8.1f}" if e["seconds"] is not None else "       -"
        scaled = f"{e['scaled_seconds']:7.1f}" if "scaled_seconds" in e else "      -"
        busy = e.get("busy")
        load = f"{busy['other_running']:10.2f}" if busy else "         -"
        flag = "  (over the budget)" if "scaled_seconds" in e and e["scaled_seconds"] > CHAPTER_BUDGET_S else ""
        print(f"  {sec}  {scaled}  {load}  {e['status']:6s}  {chapter}{flag}")
    total = sum(r["seconds"] for r in rows if r["seconds"])
    print(f"  total notebook execution {total:.1f} s; whole build {wall:.1f} s. 'scaled' = seconds on the reference "
          f"machine; 'other load' = mean number of other runnable programs meanwhile. Budget {CHAPTER_BUDGET_S} s "
          "per chapter (scaled, idle machine).")

    if failed:
        print("\nThese chapters raised while executing:", file=sys.stderr)
        for r in failed:
            cell = failing_cell(r["path"], r["traceback"])
            where = f" (code cell {cell[0]}: {cell[1]})" if cell else ""
            print(f"  - {r['chapter']}{where}\n{last_lines(r['traceback'])}\n    What to do: "
                  f"{remedy(r['traceback'], timeout)}", file=sys.stderr)
    # Sphinx reports "path: WARNING: message"; kernel chatter such as "[IPKernelApp] WARNING | ..." is not one.
    warnings = [ln for ln in log.splitlines() if "WARNING:" in ln or "ERROR:" in ln]
    if proc.returncode != 0 or failed:
        if warnings:
            print("\nSphinx warnings and errors (each one fails the build):", file=sys.stderr)
            for ln in warnings[:40]:
                print("  " + ln, file=sys.stderr)
        print(f"\nBook build FAILED (jupyter-book exit {proc.returncode}, "
              f"{len(failed)} failing chapter(s)).", file=sys.stderr)
        return 1
    print(f"\nBook built: {root / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
