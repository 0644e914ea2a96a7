"""devlint.lazyre: module-level patterns compiled on first use behave as compiled ones."""

import re
import subprocess
import sys

from devlint import lazyre


def test_lazy_pattern_answers_as_the_compiled_one():
    lazy = lazyre.compile(rb"^([ \t]*)def[ \t]+(\w+)", re.M)
    eager = re.compile(rb"^([ \t]*)def[ \t]+(\w+)", re.M)
    src = b"x = 1\n    def f(a):\n  def g():\n"
    assert [m.groups() for m in lazy.finditer(src)] == [m.groups() for m in eager.finditer(src)]
    assert lazy.search(src).span() == eager.search(src).span()
    assert lazy.match(src) is None and lazy.sub(b"", src) == eager.sub(b"", src)
    assert (lazy.pattern, lazy.flags, lazy.groups) == (eager.pattern, eager.flags, eager.groups)


def test_an_unknown_attribute_still_raises():
    lazy = lazyre.compile(r"a")
    try:
        lazy.no_such_method
    except AttributeError:
        pass
    else:
        raise AssertionError("expected AttributeError")
    assert lazy.fullmatch("a")


def test_importing_the_engine_compiles_none_of_devlints_patterns():
    # What a warm-cache hook call imports must not pay for patterns it never uses.
    code = (
        "import re, sys\n"
        "calls = []\n"
        "orig = re.compile\n"
        "def spy(p, flags=0):\n"
        "    f = sys._getframe(1).f_globals.get('__name__', '')\n"
        "    if f.startswith(('devlint', 'rules')) and f != 'devlint.catalogue': calls.append(f)\n"
        "    return orig(p, flags)\n"
        "re.compile = spy\n"
        "import devlint.project, devlint.engine, devlint.rules, devlint.notebook, devlint.suppression\n"
        "print(sorted(set(calls)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
