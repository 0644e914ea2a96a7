import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))

from fixtures_lib import MEMO_ENV  # noqa: E402


def pytest_configure(config):
    # On the controlling process only (xdist workers inherit the variable): one folder where
    # fixture-program runs are memoised for every worker of this session.
    if not hasattr(config, "workerinput") and MEMO_ENV not in os.environ:
        config._devlint_memo = tempfile.mkdtemp(prefix="devlint-runs-")
        os.environ[MEMO_ENV] = config._devlint_memo


def pytest_unconfigure(config):
    memo = getattr(config, "_devlint_memo", None)
    if memo:
        os.environ.pop(MEMO_ENV, None)
        shutil.rmtree(memo, ignore_errors=True)
