"""devlint never imports or runs the code it analyses (and never imports torch to lint)."""

from __future__ import annotations

import subprocess
import sys

from clihelp import no_traceback, run_cli

PAYLOAD = "import pathlib; pathlib.Path({marker!r}).write_text('executed {who}')\n"


def _plant(root, marker):
    pkg = root / "proj"
    (pkg / "mypkg").mkdir(parents=True)
    (pkg / "mypkg" / "__init__.py").write_text(PAYLOAD.format(marker=str(marker), who="package"))
    (pkg / "conftest.py").write_text(PAYLOAD.format(marker=str(marker), who="conftest"))
    (pkg / "setup.py").write_text(PAYLOAD.format(marker=str(marker), who="setup"))
    # a fake torch next to the code: importing torch from here would run it
    (pkg / "torch").mkdir()
    (pkg / "torch" / "__init__.py").write_text(PAYLOAD.format(marker=str(marker), who="fake torch"))
    (pkg / "train.py").write_text(
        PAYLOAD.format(marker=str(marker), who="train")
        + "import torch\nimport mypkg\nx = torch.ones(2).cuda()\nx.cuda()\n"
        + "if __name__ == '__main__':\n    " + PAYLOAD.format(marker=str(marker), who="main")
    )
    return pkg


def test_lint_and_fix_never_execute_the_code(tmp_path):
    marker = tmp_path / "EXECUTED"
    pkg = _plant(tmp_path, marker)
    env = {"PYTHONPATH": str(pkg)}  # even with the project importable
    lint = run_cli("--select", "ALL", ".", cwd=pkg, env=env)
    no_traceback(lint)
    assert lint.returncode == 1 and "train.py:" in lint.stdout
    fix = run_cli("--fix", "--unsafe-fixes", "--select", "ALL", ".", cwd=pkg, env=env)
    no_traceback(fix)
    assert ".to(device)" in (pkg / "train.py").read_text()
    assert not marker.exists(), marker.read_text()


def test_devlint_does_not_import_torch_or_the_linted_modules(tmp_path):
    marker = tmp_path / "EXECUTED"
    pkg = _plant(tmp_path, marker)
    code = (
        "import sys\n"
        "from devlint.cli import main\n"
        "try:\n"
        "    main(['--fix', '--unsafe-fixes', '--select', 'ALL', '.'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'mypkg', 'train', 'setup', 'conftest'))\n"
        "print('IMPORTED', bad)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=pkg, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "IMPORTED []" in proc.stdout, proc.stdout[-2000:]
    assert not marker.exists(), marker.read_text()
