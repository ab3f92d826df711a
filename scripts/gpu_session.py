"""A time-boxed session on one GPU: what the machine is, how fast it trains, then as much of the fine-tuning
campaign as fits before a deadline, several runs sharing the GPU.

    python scripts/gpu_session.py --data-root DIR --out OUT --minutes 9

``DIR`` holds ``flowers102/`` (the official layout). Steps, each written under ``OUT``:

1. ``env.txt``: the GPU, the driver and the library versions;
2. ``bench.txt``: ``benchmarks/bench_train.py`` alone on the GPU (EfficientNet-Lite0 and GoogLeNet on Flowers-102
   with the pre-resized image cache on and off, and full-size JPEGs decoded every step);
3. the campaign of ``python -m zslib finetune`` (:func:`zslib.campaign.run.campaign_configs`: the same configs,
   so the same config hashes), trained by ``--parallel`` worker processes that take jobs from a queue folder.
   A method's test runs join the front of the queue as soon as its validation runs are stored and its setting
   is chosen by the campaign's rule (:func:`zslib.engine.choice.choose`, "off" a candidate). At the deadline no
   new job starts and the running ones are stopped; every finished run stays stored (``logs/worker-*.log``);
4. ``table.md``: :func:`zslib.campaign.run.run_campaign` over the methods whose runs are all stored (it loads
   them, it trains nothing), with the campaign's manifest;
5. ``results.tar.gz``: the results (JSON and the workers' logs; no checkpoints), to be merged into ``results/`` and recorded with
   ``python -m zslib record --profile full``.

Runs sharing the GPU train more images per second together than one alone (EfficientNet-Lite0 at batch 128
leaves most of a data-centre GPU idle), but each run's own images per second is then a share: every result
written by a worker says how many runs shared the GPU (``provenance["concurrent_runs"]``). The benchmark of
step 2 runs alone.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _environment(out: Path) -> None:
    lines = []
    for cmd in (["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv"], ["nproc"]):
        try:
            lines.append(subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip())
        except (OSError, subprocess.TimeoutExpired) as err:
            lines.append(f"{cmd[0]}: {err}")
    import torch
    import torchvision

    versions = {"python": sys.version.split()[0], "torch": torch.__version__, "torchvision": torchvision.__version__,
                "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version()}
    try:
        import timm

        versions["timm"] = timm.__version__
    except ImportError:
        versions["timm"] = "missing"
    lines.append(json.dumps(versions))
    (out / "env.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)


def _bench(out: Path, data_root: Path, seconds_each: int) -> None:
    """bench_train.py's rows, each command under its own time limit (a slow one never eats the campaign)."""
    script = str(ROOT / "benchmarks" / "bench_train.py")
    commands = [
        ["--backbones", "efficientnet_lite0", "googlenet", "--data", "flowers", "--root", str(data_root), "--cache", "on"],
        ["--backbones", "efficientnet_lite0", "--data", "flowers", "--root", str(data_root), "--cache", "off"],
        ["--backbones", "efficientnet_lite0", "--data", "fake-cub", "--cache", "off"],
    ]
    with open(out / "bench.txt", "a") as log:
        for args in commands:
            log.write(f"$ bench_train.py {' '.join(args)}\n")
            log.flush()
            try:
                subprocess.run([sys.executable, script, *args], stdout=log, stderr=subprocess.STDOUT,
                               timeout=seconds_each, check=False)
            except subprocess.TimeoutExpired:
                log.write(f"(stopped after {seconds_each} s)\n")
            log.flush()
    print((out / "bench.txt").read_text(), flush=True)


# ---- the campaign's runs through a queue folder -------------------------------------------------------------

def _enqueue(queue: Path, priority: str, config) -> None:
    from zslib.engine.config import config_hash

    path = queue / "todo" / f"{priority}-{config_hash(config)}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(config.as_dict()))
    tmp.rename(path)


def _stored(config, results: Path):
    from zslib.engine.store import load_result, result_path

    path = result_path(config, results)
    return load_result(path) if path.exists() else None


def worker(queue: Path, results: Path, device: str, deadline: float) -> int:
    """Take jobs from ``queue/todo`` (an atomic rename claims one) until the queue is closed or the deadline
    is too near for another run (judged from this worker's own run times)."""
    from zslib.engine.config import Config
    from zslib.engine.runner import run

    durations: list[float] = []
    while True:
        left = deadline - time.time()
        if left < (0.9 * max(durations) if durations else 20.0):
            print(f"worker {os.getpid()}: {left:.0f} s left, no new run", flush=True)
            return 0
        jobs = sorted((queue / "todo").glob("*.json"))
        if not jobs:
            if (queue / "closed").exists():
                return 0
            time.sleep(1.0)
            continue
        claimed = queue / "taken" / f"{jobs[0].name}.{os.getpid()}"
        try:
            jobs[0].rename(claimed)
        except FileNotFoundError:  # another worker took it first
            continue
        config = Config.from_dict(json.loads(claimed.read_text()))
        started = time.time()
        try:
            result = run(config, results, device=device, progress=False,
                         checkpoint_every=max(1, config.iterations // 2))
        except Exception:  # one broken configuration must not end the session's other runs
            import traceback

            print(f"{config.name} {config.hash} failed:\n{traceback.format_exc()}", flush=True)
            continue
        durations.append(time.time() - started)
        p = result.provenance
        split = "val" if config.validation_fraction > 0 else "unseen"
        print(f"{config.name} {config.hash}: {split} R@1 {100 * result.metric('R@1', split):.1f} "
              f"({durations[-1]:.0f} s, {p.get('images_per_second', 0):,.0f} img/s, "
              f"data wait {100 * p.get('data_wait_share', 0):.0f}%)", flush=True)


def campaign(args, out: Path, deadline: float) -> list[str]:
    """Queue the campaign's runs, start the workers, queue each method's test runs once it is chosen; return the
    methods whose every run is stored by the deadline."""
    from zslib.campaign.run import campaign_configs, setting_to_test
    from zslib.engine.choice import choose

    configs = campaign_configs(args.dataset, methods=args.methods, validation_seeds=args.validation_seeds,
                               test_seeds=args.test_seeds, overrides=args.overrides)
    import tempfile

    from zslib.engine.runner import build_data

    queue, results = Path(tempfile.mkdtemp(prefix="zslib-queue-")), Path(args.results)
    for stage in ("validation", "test"):  # build each split's image cache once, before the workers need it
        first = next(iter(configs[stage][args.methods[0]].values()))[0]
        build_data(first)
        print(f"data of the {stage} stage ready at {time.time() - args.started:.0f} s", flush=True)
    for sub in ("todo", "taken"):
        (queue / sub).mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()

    def put(priority, config):
        if config.hash not in seen and _stored(config, results) is None:
            seen.add(config.hash)
            _enqueue(queue, priority, config)

    for c in (c for seeds in configs["floor"].values() for c in seeds):
        put("0", c)
    n = 0
    for m in args.methods:  # method by method, so that the first methods reach their test stage early
        for seeds in configs["validation"][m].values():
            for c in seeds:
                n += 1
                put(f"3-{n:04d}", c)
        for c in configs["test"][m]["off"]:
            n += 1
            put(f"3-{n:04d}", c)

    (results / "logs").mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "ZS_CONCURRENT_RUNS": str(args.parallel), "OMP_NUM_THREADS": "2"}
    procs = []
    for k in range(args.parallel):
        log = open(results / "logs" / f"worker-{k}.log", "w")
        procs.append(subprocess.Popen([sys.executable, __file__, "worker", str(queue), str(results), args.device,
                                       str(deadline)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True))
    chosen: dict = {}
    try:
        while time.time() < deadline and any(p.poll() is None for p in procs):
            for m in args.methods:
                if m in chosen:
                    continue
                runs = {k: [_stored(c, results) for c in seeds] for k, seeds in configs["validation"][m].items()}
                if all(r is not None for rs in runs.values() for r in rs):
                    choice = choose(runs, off="off", metric="R@1", split="val")
                    setting = setting_to_test(choice)
                    chosen[m] = setting
                    print(f"{m}: {choice.sentence()} -> test runs of {setting!r} queued", flush=True)
                    for c in configs["test"][m][setting]:
                        n += 1
                        put(f"1-{n:04d}", c)
            if len(chosen) == len(args.methods):
                (queue / "closed").touch()
            time.sleep(2.0)
    finally:
        (queue / "closed").touch()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
        time.sleep(3.0)
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    done = []
    for m in chosen:
        test = configs["test"][m]["off"] + configs["test"][m][chosen[m]]
        if all(_stored(c, results) is not None for c in test):
            done.append(m)
    print(f"methods with every run stored: {done or 'none'}", flush=True)
    return done


def _table(args, out: Path, methods: list[str]) -> None:
    from zslib.campaign.run import run_campaign

    lines = []
    camp = run_campaign(args.dataset, methods=tuple(methods), results_dir=args.results, device=args.device,
                        validation_seeds=args.validation_seeds, test_seeds=args.test_seeds,
                        overrides=args.overrides, out=lines.append)
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    if camp.trained:
        print(f"warning: the table step trained {camp.trained} run(s)", flush=True)


def _pack(results: Path, out: Path) -> None:
    with tarfile.open(out / "results.tar.gz", "w:gz") as tar:
        for path in sorted(results.rglob("*")):
            if path.is_file() and path.suffix in (".json", ".md", ".log") and "checkpoints" not in path.parts:
                tar.add(path, arcname=str(path.relative_to(results)))


def main(argv=None) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "worker":
        _, _, queue, results, device, deadline = sys.argv
        return worker(Path(queue), Path(results), device, float(deadline))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", required=True, help="folder holding flowers102/")
    p.add_argument("--out", required=True)
    p.add_argument("--results", default=None, help="results folder (default: OUT/../results)")
    p.add_argument("--minutes", type=float, default=9.0, help="the whole session's deadline")
    p.add_argument("--bench-seconds", type=int, default=60, help="time limit of each benchmark command")
    p.add_argument("--skip-bench", action="store_true")
    p.add_argument("--parallel", type=int, default=6, help="campaign runs sharing the GPU")
    p.add_argument("--dataset", default="flowers102")
    p.add_argument("--methods", default="cml,deml,adapt_adv,zsml,jrd")
    p.add_argument("--validation-seeds", default="0,1")
    p.add_argument("--test-seeds", default="0,1,2")
    p.add_argument("--device", default="cuda")
    p.add_argument("--overrides", default=None, help="JSON of Config fields set on every run (a CPU rehearsal)")
    p.add_argument("--reserve", type=float, default=40.0, help="seconds kept after the campaign for table and packing")
    args = p.parse_args(argv)
    started = time.time()
    deadline = started + 60 * args.minutes
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.results = args.results or str(out.parent / "results")
    args.started = started
    args.methods = tuple(args.methods.split(","))
    args.validation_seeds = tuple(int(s) for s in args.validation_seeds.split(","))
    args.test_seeds = tuple(int(s) for s in args.test_seeds.split(","))
    args.overrides = json.loads(args.overrides) if args.overrides else None
    os.environ["ZS_DATA"] = str(Path(args.data_root).resolve())
    _environment(out)
    if not args.skip_bench:
        _bench(out, Path(args.data_root).resolve(), args.bench_seconds)
    print(f"campaign from {time.time() - started:.0f} s", flush=True)
    done = campaign(args, out, deadline - args.reserve)
    if done:
        try:
            _table(args, out, done)
        except Exception as err:  # the runs are stored; the table can be made where they land
            print(f"table: {type(err).__name__}: {err}", flush=True)
    _pack(Path(args.results), out)
    print(f"session done in {time.time() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
