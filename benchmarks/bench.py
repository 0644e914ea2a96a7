#!/usr/bin/env python
"""Time devlint against the LibCST parse floor (and TorchFix, when installed).

    python benchmarks/bench.py                 # torch/{nn,optim,utils,cuda,distributed}, 3 rounds
    python benchmarks/bench.py --quick         # torch/{optim,cuda}, 1 round
    python benchmarks/bench.py --rounds 5 src/ # your own code

Every variant runs as its own process, in alternating rounds (floor, cold -j1, cold -j2,
warm, every file parsed, one file cold and warm, Python importing LibCST, floor, cold -j1, ...), so a machine that gets busier or quieter part way
affects them alike. It prints the medians, the ratios to the floor and to TorchFix, the
targets, and the peak memory (resident set of the largest process: the CLI with
--jobs 1, the largest of the CLI and its workers otherwise). The floor is a bare
``libcst.parse_module`` loop over the same files, already read, without start-up;
devlint's times are wall clock, start-up included. A benchmark, not a test: it asserts
nothing, and its numbers mean something only on a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

FLOOR = r"""
import sys, time
import libcst
srcs = [open(p, "rb").read() for p in open(sys.argv[1]).read().splitlines()]
t, c = time.perf_counter(), time.process_time()
for s in srcs:
    try:
        libcst.parse_module(s)
    except Exception:
        pass
print(time.perf_counter() - t, time.process_time() - c)
"""

# Every run sees the environment of an installed devlint: pip writes bytecode when it installs a
# wheel, so a machine that sets PYTHONDONTWRITEBYTECODE (containers often do) would otherwise time
# compiling devlint's own modules from source on every start (about 0.1 s of a one-file run).
BASE_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

TORCH_DIRS = ("nn", "optim", "utils", "cuda", "distributed")
QUICK_DIRS = ("optim", "cuda")


def torch_dirs(names) -> list[str]:
    import importlib.util

    spec = importlib.util.find_spec("torch")  # locate it without importing it
    if spec is None or not spec.submodule_search_locations:
        sys.exit("torch is not installed: give directories to time")
    base = list(spec.submodule_search_locations)[0]
    return [os.path.join(base, n) for n in names if os.path.isdir(os.path.join(base, n))]


def run(cmd: list[str], env=None) -> tuple[float, float, int, str]:
    """(wall seconds, CPU seconds of the whole process tree, peak RSS in KiB of the
    largest process in the tree, stdout)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        if p.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd[:6])} ... failed ({p.returncode}):\n{err.read().decode(errors='replace')[-3000:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", help="directories/files to time (default: parts of the installed torch)")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 3; 1 with --quick)")
    ap.add_argument("--quick", action="store_true", help=f"torch/{{{','.join(QUICK_DIRS)}}} only, 1 round")
    ap.add_argument("--jobs", type=int, default=2, help="workers for the parallel run (default 2)")
    ap.add_argument("--select", default="ALL", help="rules to run (default ALL)")
    ap.add_argument("--torchfix", default=None, help="the torchfix executable (default: found on PATH)")
    ap.add_argument("--no-torchfix", action="store_true", help="skip TorchFix (it is slow)")
    ap.add_argument("--torchfix-rounds", type=int, default=1, help="rounds for TorchFix (default 1)")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from devlint import __version__
    from devlint.discovery import discover

    paths = args.paths or torch_dirs(QUICK_DIRS if args.quick else TORCH_DIRS)
    files, errors = discover(paths)
    if errors or not files:
        sys.exit(f"nothing to time: {errors}")
    lines = 0
    cuda_files = []
    for f in files:
        with open(f, "rb") as fh:
            data = fh.read()
        lines += data.count(b"\n")
        if b"cuda" in data:
            cuda_files.append((len(data), f))
    one = sorted(cuda_files or [(os.path.getsize(f), f) for f in files])[len(cuda_files or files) // 2][1]

    torchfix = None if args.no_torchfix else (args.torchfix or shutil.which("torchfix"))
    py = sys.executable
    devlint = [py, "-m", "devlint", "check", "--select", args.select, "--output-format", "json", "--exit-zero"]
    work = tempfile.mkdtemp(prefix="devlint-bench-")
    listing = os.path.join(work, "files.txt")
    with open(listing, "w") as fh:
        fh.write("\n".join(files))
    cache_dir = os.path.join(work, "cache")

    variants = {
        "libcst parse floor": None,
        "devlint --no-cache --jobs 1": devlint + ["--no-cache", "--jobs", "1", *paths],
        # the same run with every file forced through the parser and every rule: the
        # prefilter's help taken away, so the ratio to the floor is the pipeline's own cost
        "devlint --jobs 1, no prefilter": devlint + ["--no-cache", "--jobs", "1", *paths],
        # each file on its own, without the project index (what project-wide facts cost)
        "devlint --jobs 1, no project index": devlint + ["--no-cache", "--jobs", "1", *paths],
        f"devlint --no-cache --jobs {args.jobs}": devlint + ["--no-cache", "--jobs", str(args.jobs), *paths],
        "devlint warm cache": devlint + ["--cache-dir", cache_dir, *paths],
        "devlint one file": devlint + ["--no-cache", one],
        "devlint one file, warm cache": devlint + ["--cache-dir", cache_dir, one],
        # what any Python tool on LibCST pays before it reads a byte (context for the one-file rows)
        "python -c 'import libcst, click'": [py, "-c", "import libcst, click"],
    }
    if torchfix:
        variants["TorchFix --jobs 1"] = [torchfix, "--jobs", "1", *paths]

    print(f"devlint {__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"{len(files)} files, {lines} lines from {', '.join(paths)}; one file: {one}")
    print(f"torchfix: {torchfix or 'not installed (pip install torchfix) or skipped'}")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("PYTHONDONTWRITEBYTECODE is set here: unset for the runs (an installed devlint has its bytecode)")
    run(devlint + ["--cache-dir", cache_dir, *paths], env=BASE_ENV)  # prime the cache and bytecode (untimed)
    run(devlint + ["--cache-dir", cache_dir, one], env=BASE_ENV)

    times: dict[str, list[float]] = {k: [] for k in variants}
    cpus: dict[str, list[float]] = {k: [] for k in variants}
    mem: dict[str, int] = {k: 0 for k in variants}
    outputs: dict[str, str] = {}
    for r in range(rounds):
        for name, cmd in variants.items():
            if name.startswith("TorchFix") and r >= args.torchfix_rounds:
                continue
            if cmd is None:
                _, _, rss, out = run([py, "-c", FLOOR, listing])
                wall, cpu = map(float, out.split())
            else:
                env = ({**BASE_ENV, "DEVLINT_NO_PREFILTER": "1"} if "no prefilter" in name else
                       {**BASE_ENV, "DEVLINT_NO_PROJECT": "1"} if "no project index" in name else BASE_ENV)
                wall, cpu, rss, out = run(cmd, env=env)
                if name.startswith("devlint") and "one file" not in name and "no project" not in name:
                    outputs[name] = out
            times[name].append(wall)
            cpus[name].append(cpu)
            mem[name] = max(mem[name], rss)
            print(f"  round {r + 1}: {name:<34} {wall:8.2f} s wall {cpu:8.2f} s CPU {rss / 1024:6.0f} MB",
                  flush=True)
    shutil.rmtree(work, ignore_errors=True)

    same = len(set(outputs.values())) == 1
    med = {k: statistics.median(v) for k, v in times.items() if v}
    cmed = {k: statistics.median(v) for k, v in cpus.items() if v}
    floor = med["libcst parse floor"]
    cold = med["devlint --no-cache --jobs 1"]
    forced = "devlint --jobs 1, no prefilter"
    par = med[f"devlint --no-cache --jobs {args.jobs}"]
    tf = med.get("TorchFix --jobs 1")
    print()
    cfloor = cmed["libcst parse floor"]
    print("| variant | wall s (median) | wall x floor | wall x TorchFix | CPU s | CPU x floor | peak MB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, m in med.items():
        tfr = f"{m / tf:.3f}" if tf else "-"
        print(f"| {name} | {m:.2f} | {m / floor:.2f} | {tfr} | {cmed[name]:.2f} | {cmed[name] / cfloor:.2f} "
              f"| {mem[name] / 1024:.0f} |")
    print()
    dl_mem = max(v for k, v in mem.items() if k.startswith("devlint"))
    checks = [
        ("cold --jobs 1 <= 1.5x floor (wall)", cold / floor, cold / floor <= 1.5),
        ("cold --jobs 1 <= 1.5x floor (CPU)", cmed["devlint --no-cache --jobs 1"] / cfloor,
         cmed["devlint --no-cache --jobs 1"] / cfloor <= 1.5),
        ("cold --jobs 1, every file parsed <= 1.5x floor (wall)", med[forced] / floor, med[forced] / floor <= 1.5),
        ("project index costs <= 10% of the cold run", cold / med["devlint --jobs 1, no project index"] - 1,
         cold / med["devlint --jobs 1, no project index"] <= 1.10),
        (f"--jobs {args.jobs} speed-up >= 1.7x", cold / par, cold / par >= 1.7),
        ("warm <= 0.05x cold", med["devlint warm cache"] / cold, med["devlint warm cache"] / cold <= 0.05),
        ("one file <= 0.3 s", med["devlint one file"], med["devlint one file"] <= 0.3),
        ("one file, warm cache <= 0.3 s", med["devlint one file, warm cache"],
         med["devlint one file, warm cache"] <= 0.3),
        ("devlint peak memory per process <= 300 MB", dl_mem / 1024, dl_mem <= 300 * 1024),
    ]
    if tf:
        checks.insert(1, ("TorchFix / cold --jobs 1 >= 10x", tf / cold, tf / cold >= 10))
    for label, value, ok in checks:
        print(f"{'ok  ' if ok else 'MISS'} {label}: {value:.3f}")
    floor1 = med["python -c 'import libcst, click'"]
    print(f"     one file beyond starting Python and importing LibCST and click: "
          f"{med['devlint one file'] - floor1:.3f} s (that import alone: {floor1:.3f} s)")
    print(f"{'ok  ' if same else 'MISS'} every devlint run reported the same findings")


if __name__ == "__main__":
    main()
