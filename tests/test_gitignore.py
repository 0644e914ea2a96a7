"""devlint's own gitignore matcher agrees with pathspec's GitIgnoreSpec (test-only dependency)."""

from __future__ import annotations

import itertools

import pytest

from devlint.gitignore import GitIgnoreSpec

pathspec = pytest.importorskip("pathspec", reason="pathspec (a test extra) is the reference implementation")

PATTERNS = [
    "build/", "/build/", "*.pyc", "third_party/", "legacy", "/legacy", "src/gen/*.py", "docs/**",
    "**/tests", "**/tests/*.py", "a/**/b", "*_pb2.py", "data?.py", "file[0-9].py", "[!x]y.py",
    "!keep.py", "sub/", "\\#hash.py", "trail ", "*", "**", "conftest.py", "tests/**", "x/y/",
    "notebooks/*.ipynb", "!/build/keep.py", "foo/*/bar.py", "scripts/*", "!scripts/animate.py",
]
PATHS = [
    "build/", "build/x.py", "a/build/x.py", "src/build/", "x.pyc", "a/b/c.pyc", "third_party/m.py",
    "legacy", "legacy/m.py", "src/legacy/m.py", "src/gen/a.py", "src/gen/sub/a.py", "docs/a/b.md",
    "docs/", "tests/", "pkg/tests/", "pkg/tests/t.py", "a/b", "a/x/y/b", "a/b/c.py", "m_pb2.py",
    "data1.py", "data12.py", "file3.py", "filex.py", "ay.py", "xy.py", "keep.py", "sub/keep.py",
    "#hash.py", "trail", "conftest.py", "pkg/conftest.py", "tests/unit/t.py", "x/y/z.py", "x/y",
    "notebooks/nb.ipynb", "notebooks/sub/nb.ipynb", "build/keep.py", "foo/q/bar.py", "foo/bar.py",
    "scripts/", "scripts/animate.py", "scripts/other.py",
]


@pytest.mark.parametrize("pattern", PATTERNS)
def test_single_patterns_match_like_pathspec(pattern):
    ours, ref = GitIgnoreSpec.from_lines([pattern]), pathspec.GitIgnoreSpec.from_lines([pattern])
    for path in PATHS:
        assert ours.match_file(path) == ref.match_file(path), (pattern, path)


def test_negation_and_last_match_wins_like_pathspec():
    for combo in itertools.combinations(PATTERNS, 3):
        lines = list(combo) + ["!keep.py", "# a comment", ""]
        ours, ref = GitIgnoreSpec.from_lines(lines), pathspec.GitIgnoreSpec.from_lines(lines)
        for path in PATHS:
            a, b = ours.check_file(path), ref.check_file(path)
            assert (a.include, a.index) == (b.include, b.index), (lines, path)
