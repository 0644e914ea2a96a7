#!/usr/bin/env python
"""Bring the ecosystem corpus out at its pinned commits, outside this repository.

    python benchmarks/ecosystem/extract.py DEST                 # clone each repository
    python benchmarks/ecosystem/extract.py DEST --mirror DIR    # or read local git directories
    python benchmarks/ecosystem/extract.py DEST --set tune      # one half only

Each repository of ``repos.toml`` lands in ``DEST/<owner>+<name>/`` as the tree of its pinned
commit, with a ``.devlint-ecosystem`` file recording the commit. A directory
already holding that commit is left alone, so a second run only fills in what is missing.
Each tree also gets an empty ``.git`` directory, the marker a clone has: devlint finds the
project root where a user's checkout has it (without one, a repository whose packages have no
``__init__.py`` would be read as one project per directory, and imports such as
``from pkg.utils import f`` would resolve nowhere).
``--mirror DIR`` looks for a git directory at ``DIR/<owner>+<name>/repo`` (with or without
``.git``) or ``DIR/<owner>+<name>.git`` before cloning; without a mirror each repository is
fetched at its commit with ``git`` from ``--url`` (default ``https://github.com/{name}.git``).
No third-party source ever enters this repository: DEST must lie outside it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
MANIFEST = os.path.join(HERE, "repos.toml")
STAMP = ".devlint-ecosystem"
MARKER = ".git"  # an empty directory: where a checkout's root is


def load_manifest(path: str = MANIFEST) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["repo"]


def slug(name: str) -> str:
    return name.replace("/", "+")


def mirror_gitdir(mirror: str | None, name: str) -> str | None:
    if not mirror:
        return None
    for cand in (
        os.path.join(mirror, slug(name), "repo", ".git"),
        os.path.join(mirror, slug(name), "repo"),
        os.path.join(mirror, slug(name) + ".git"),
    ):
        if os.path.isfile(os.path.join(cand, "HEAD")):
            return cand
    return None


def clone_gitdir(url: str, commit: str, tmp: str) -> str:
    gitdir = os.path.join(tmp, "git")
    subprocess.run(["git", "init", "-q", "--bare", gitdir], check=True)
    subprocess.run(["git", "--git-dir", gitdir, "fetch", "-q", "--depth", "1", url, commit], check=True)
    return gitdir


def extract(gitdir: str, commit: str, dest: str) -> tuple[int, int]:
    """Write the tree of ``commit`` into ``dest``: (files written, blobs missing). A mirror
    may lack its largest blobs (images, weights); those are skipped, never sources."""
    listing = subprocess.run(
        ["git", "--git-dir", gitdir, "ls-tree", "-r", "-z", commit], check=True, capture_output=True
    ).stdout.split(b"\0")
    entries = []
    for row in filter(None, listing):
        meta, path = row.split(b"\t", 1)
        mode, kind, sha = meta.split()
        if kind == b"blob" and mode != b"120000":  # no symlinks
            entries.append((path.decode("utf-8", "surrogateescape"), sha.decode()))
    proc = subprocess.Popen(
        ["git", "--git-dir", gitdir, "cat-file", "--batch"], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    written = missing = 0
    root = os.path.realpath(dest)
    for path, sha in entries:
        proc.stdin.write(sha.encode() + b"\n")
        proc.stdin.flush()
        header = proc.stdout.readline().split()
        if len(header) < 3:  # "<sha> missing"
            missing += 1
            continue
        data = proc.stdout.read(int(header[2]))
        proc.stdout.read(1)  # the newline after each object
        target = os.path.realpath(os.path.join(dest, path))
        if os.path.commonpath([target, root]) != root:
            continue  # a path that would leave DEST
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data)
        written += 1
    proc.stdin.close()
    proc.wait()
    os.makedirs(os.path.join(dest, MARKER), exist_ok=True)
    with open(os.path.join(dest, STAMP), "w") as f:
        f.write(commit + "\n")
    return written, missing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dest", help="directory to extract into (outside this repository)")
    ap.add_argument("--mirror", help="directory of local git directories (<owner>+<name>/repo)")
    ap.add_argument("--url", default="https://github.com/{name}.git", help="clone URL template")
    ap.add_argument("--set", choices=("tune", "check", "fresh", "fresh2", "fresh3", "fresh4", "fresh5", "fresh6", "fresh7", "fresh8", "fresh9", "fresh10", "fresh11", "fresh12", "fresh13", "fresh14", "fresh15", "fresh16", "fresh17", "fresh18", "fresh19", "fresh20", "fresh21", "fresh22", "fresh23"), help="only this set of the corpus")
    ap.add_argument("--manifest", default=MANIFEST, help="another repos.toml")
    args = ap.parse_args(argv)
    repo_root = os.path.dirname(os.path.dirname(HERE))
    dest_root = os.path.abspath(args.dest)
    if os.path.commonpath([dest_root, repo_root]) == repo_root:
        print(f"extract.py: {args.dest}: must lie outside the devlint repository", file=sys.stderr)
        return 2
    failed = 0
    for repo in load_manifest(args.manifest):
        if args.set and repo["set"] != args.set:
            continue
        name, commit = repo["name"], repo["commit"]
        dest = os.path.join(dest_root, slug(name))
        stamp = os.path.join(dest, STAMP)
        if os.path.isfile(stamp) and open(stamp).read().strip() == commit:
            os.makedirs(os.path.join(dest, MARKER), exist_ok=True)  # (trees extracted before the marker)
            print(f"{name}: already at {commit[:12]}")
            continue
        try:
            with tempfile.TemporaryDirectory() as tmp:
                gitdir = mirror_gitdir(args.mirror, name) or clone_gitdir(args.url.format(name=name), commit, tmp)
                n, missing = extract(gitdir, commit, dest)
            print(f"{name}: {n} files at {commit[:12]}" + (f" ({missing} large blobs absent)" if missing else ""))
        except (subprocess.CalledProcessError, OSError) as e:
            failed += 1
            print(f"{name}: could not extract {commit[:12]}: {e}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
