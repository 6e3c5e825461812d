"""The usage examples in the docstrings run and print what they show.

An example that needs objects its docstring does not make (a model, a trained run) is marked
``# doctest: +SKIP``; every other one is run here, so an example cannot drift from the code.
"""

from __future__ import annotations

import doctest
import importlib
import io
import pkgutil

import pytest

import sentinel

# An optional extra's module whose own import needs that extra (transformers) is checked where
# the extra is installed.
OPTIONAL = {"sentinel.callbacks.hf_trainer": "transformers"}


def _modules() -> list[str]:
    names = ["sentinel"]
    for info in pkgutil.walk_packages(sentinel.__path__, "sentinel."):
        names.append(info.name)
    # callbacks/ and cli/ are installed as sentinel.callbacks and sentinel.cli (not under sentinel/)
    for package in ("sentinel.callbacks", "sentinel.cli"):
        names.append(package)
        found = importlib.import_module(package)
        names += [info.name for info in pkgutil.walk_packages(found.__path__, package + ".")]
    return sorted(set(names))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples_run(name):
    if name in OPTIONAL:
        pytest.importorskip(OPTIONAL[name])
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = io.StringIO()
    for test in doctest.DocTestFinder().find(module, name):
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()


def test_the_examples_leave_no_read_ahead_behind():
    # An example that starts a read-ahead must end it: the readers' state is process-wide.
    from sentinel.analyze.loaders import tfrecord
    from sentinel.store import steps_csv

    for name in ("sentinel.analyze.loaders.tfrecord", "sentinel.store.steps_csv", "sentinel.parse_ahead"):
        test_docstring_examples_run(name)
    assert not tfrecord._AHEAD._pending and not steps_csv._AHEAD._pending
