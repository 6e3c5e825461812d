"""Megatron reader before/after: every file under tests/fixtures, examples and ../shared/reallogs read by the
reader of a git revision (imported as ``sentinel_ref``) and by the working tree's, compared field by
field (source, name, path, steps values/dtypes/column order/index, events, meta, warnings, errors),
with no options, loss_col="grad norm", loss_col="lm loss" and a step_col; and which loader claims
each file (discovery order) in both, and what ``discover_runs`` reads from it. Besides the files on
disk, ``SYNTHETIC`` logs cover what the fixtures do not (restarts, cut lines, overflow placement,
CRLF / ANSI / quoted text, fields that are not numbers).

    .venv/bin/python benchmarks/megatron_equivalence.py --rev e0ab021 [--new module:function]

(e0ab021: the last revision whose megatron.py had its own line reader; exit status 1 on any
difference.)
"""
from __future__ import annotations

import argparse
import importlib
import math
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from revision import REPO, import_as  # noqa: E402

ROOTS = [REPO / "tests" / "fixtures", REPO / "examples", REPO.parent / "shared" / "reallogs"]
OPTION_SETS = [{}, {"loss_col": "grad norm"}, {"loss_col": "lm loss"}, {"step_col": "consumed samples"}]


def _it(it, loss="2.5E+00", scale=4096.0, gn="0.329", skipped=0, nan=0, pre=" ", tail=" |", extra=""):
    return (f"{pre}iteration {it:>8d}/  159576 | consumed samples: {it * 96:>12d} | elapsed time per iteration (ms): 9.5 |"
            f" learning rate: 5.998E-05 | global batch size:    96 | lm loss: {loss} | loss scale: {scale} |"
            f" grad norm: {gn} | num zeros: 0.0 |{extra} number of skipped iterations: {skipped:>3d} |"
            f" number of nan iterations: {nan:>3d}{tail}")


def _ovf(a=4096.0, b=2048.0, rank=0, stamp="[2022-01-19 13:09:13,305] "):
    return f"{stamp}[INFO] [stage_1_and_2.py:1644:step] OVERFLOW! Rank {rank} Skipping step. Attempted loss scale: {a}, reducing to {b}"


_VAL = " validation loss at iteration {} | lm loss value: 2.800000E+00 | lm loss PPL: 1.644465E+01 |"
_NEMO = ("[NeMo I 2025-01-01 10:00:00 nemo_logging:393] Training epoch 0, iteration {0}/99 | lr: 1.499e-05 |"
         " global_batch_size: 32 | global_step: {0} | reduced_train_loss: 10.37 | train_step_timing in s: 0.9 |")
_BLOOM = ("[default7]: iteration    {}/  115311 | consumed samples:     47768496 | elapsed time per iteration (s): 106.46 |"
          " learning rate: 5.279E-05 | global batch size:  2048 | lm loss: 2.198845E+00 | grad norm: 0.242 |"
          " num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 19.238 |")
# Edge cases of the tests and of logs as people have them: noise, restarts, cut lines, overflows.
SYNTHETIC = {
    "noise.log": "\n".join(["using world size: 8", "> building GPT model ...", "time (ms) | forward-compute: 123.4 |",
                             _it(7000), "-" * 20, _VAL.format(7000), _ovf(), _ovf(rank=1), _it(7001, scale=2048.0, gn="0.5"),
                             _it(7002, "nan", 2048.0, "inf", 1, 1), ""]),
    "bf16.txt": _BLOOM.format(31214) + "\n" + _BLOOM.format(31215).replace("lm loss: 2.198845E+00 | ", "") + "\n",
    "cut.log": _it(10) + "\n" + _it(11)[: _it(11).index("grad norm") + 14],
    "cut_mid.log": "\n".join([_it(10), _it(11)[:-30], _it(12), _it(13)[:-5], ""]),
    "restart.log": "\n".join([_it(1, "5.0E+00"), _it(2, "9.0E+00", skipped=2), "resuming", _it(2, "4.0E+00"),
                               _ovf(2048.0, 1024.0), ""]),
    "restart_val.log": "\n".join([_it(10), _VAL.format(20), _it(20, "nan"), _ovf(), _it(30), _it(20, "3.0", nan=1),
                                   _VAL.format(40), _ovf(), _it(30, gn="inf").replace("lm loss: 2.5E+00 | ", ""), _VAL.format(20), ""]),
    "nemo.log": "noise\n" + "\n".join(_NEMO.format(i) for i in (9, 19, 29)) + "\n",
    "crlf.log": "\r\n".join([_it(1), _ovf(), _it(2), _it(3, "inf"), ""]),
    "cr_progress.log": "\n".join([_it(1), "\r 10%|#  |\r 20%|## |" + _it(2), _it(3) + "\r", ""]),
    "ansi.log": "\n".join(["\x1b[32m" + _it(1) + "\x1b[0m", _it(2).replace("lm loss: 2.5E+00", "lm loss: \x1b[31m2.5\x1b[0m"), _it(3), ""]),
    "quoted.md.log": "\n".join(["> " + _it(1), "> " + _ovf(), "> " + _it(2), "> " + _it(3), ""]),
    "text_values.log": "\n".join([_it(i, extra=" mode: train | tflops: 45.3TFLOPS | eta: 1:02:03 | step/sec: 3 |"
                                      " Some/Thing Else (x): 7 | moe loss: 0.1 | mtp_loss: 0.2 | x: 1_000 |") for i in (1, 2, 3)]) + "\n",
    "neox_prefix.log": "\n".join(f"samples/sec: 12.3 | iteration {i:>6d}/  320000 | lm_loss: 1.1E+01 | loss scale: 65536.0 |"
                                  f" approx flops per GPU: 45.3TFLOPS | number of skipped iterations:   0 |" for i in (10, 20, 30)) + "\n",
    "overflow_only.log": _ovf() + "\n" + _ovf() + "\n",
    "val_only.log": _VAL.format(100) + "\n" + _VAL.format(200) + "\n",
    "trailing_only_ovf.log": "\n".join([_it(5), _ovf(), _ovf(4096.0, 1024.0, stamp=""), ""]),
    "fp16_variant.log": "\n".join([_it(1), "fp16 dynamic loss scale overflow! Skipping step. Attempted loss scale: 8192, reducing to 4096",
                                    _it(2), "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 4096.0, reducing to 2048.0.", _it(3), ""]),
    "wide.log": "\n".join(_it(i, extra="".join(f" f{k}: {k} |" for k in range(120))) for i in (1, 2, 3)) + "\n",
    "tabs.log": "\n".join(_it(i).replace("grad norm:", "grad\tnorm:").replace("loss scale:", "loss  scale:") for i in (1, 2, 3)) + "\n",
    "nocolon.log": "\n".join(_it(i).replace("| num zeros: 0.0 |", "| just words | : 5 | 9: 9 |") for i in (1, 2)) + "\n",
    "empty.log": "",
    "weird_iter.log": "iteration 5/10 | lm loss: 1.0 | \niteration 6 / 10|lm loss:2.0|\n xiteration 7/10 | lm loss: 3.0 |\n",
    "unicode.log": "\n".join(_it(i).replace("num zeros", "num\u00a0zeros é") for i in (1, 2)) + "\n",
}


def files(synthetic_dir: Path | None = None) -> list[Path]:
    out = []
    for root in ROOTS:
        out += sorted(p for p in root.rglob("*") if p.is_file())
    if synthetic_dir is not None:
        for name, text in SYNTHETIC.items():
            (synthetic_dir / name).write_bytes(text.encode("utf-8"))
            out.append(synthetic_dir / name)
    return out


def outcome(load, options_cls, path, opts):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ("ok", load(path, options_cls(**opts)))
    except Exception as err:  # noqa: BLE001 - the error itself is compared
        return ("error", f"{type(err).__name__}: {err}")


def same_value(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def frame_diff(a: pd.DataFrame, b: pd.DataFrame, what: str) -> list[str]:
    if list(a.columns) != list(b.columns):
        return [f"{what} columns {list(a.columns)} != {list(b.columns)}"]
    try:
        pd.testing.assert_frame_equal(a, b, check_exact=True, check_dtype=True, check_index_type=True,
                                      check_column_type=True, check_names=True)
    except AssertionError as err:
        return [f"{what}: {str(err).splitlines()[0:4]}"]
    return []


def run_diff(a, b) -> list[str]:
    diffs = []
    if len(a) != len(b):
        return [f"{len(a)} runs != {len(b)}"]
    for ra, rb in zip(a, b):
        for attr in ("name", "path", "source"):
            if getattr(ra, attr) != getattr(rb, attr):
                diffs.append(f"{attr} {getattr(ra, attr)!r} != {getattr(rb, attr)!r}")
        diffs += frame_diff(ra.steps, rb.steps, "steps")
        diffs += frame_diff(ra.events, rb.events, "events")
        if not same_value(ra.meta, rb.meta):
            diffs.append(f"meta {ra.meta} != {rb.meta}")
        if ra.warnings != rb.warnings:
            diffs.append(f"warnings {ra.warnings} != {rb.warnings}")
    return diffs


def claimed(discover_mod, path: Path) -> str:
    try:
        runs = discover_mod.discover_runs(path)
    except Exception as err:  # noqa: BLE001
        return f"error: {type(err).__name__}"
    return ",".join(r.source for r in runs) or "-"


def main() -> int:
    # Log timestamps carry no zone: the engine reads them as UTC, the old reader as local time.
    os.environ["TZ"] = "UTC"
    time.tzset()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rev", default="HEAD", help="the revision with the old reader")
    parser.add_argument("--new", default="sentinel.analyze.loaders.megatron:load", help="module:function")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ref = import_as(args.rev, Path(tmp))
        importlib.import_module("sentinel_ref.analyze.loaders.megatron")
        importlib.import_module("sentinel_ref.analyze.discover")
        old_load = ref.analyze.loaders.megatron.load
        old_opts = ref.analyze.loaders.LoadOptions
        module, _, func = args.new.partition(":")
        new_load = getattr(importlib.import_module(module), func)
        from sentinel.analyze import discover as new_discover
        from sentinel.analyze.loaders import LoadOptions

        compared = differing = 0
        synthetic = Path(tmp) / "synthetic"
        synthetic.mkdir()
        paths = files(synthetic)
        for path in paths:
            for opts in OPTION_SETS:
                (ka, a), (kb, b) = outcome(old_load, old_opts, path, opts), outcome(new_load, LoadOptions, path, opts)
                compared += 1
                diffs = [f"{ka}: {a} != {kb}: {b}"] if ka != kb else \
                    ([f"error {a!r} != {b!r}"] if ka == "error" and a != b else run_diff(a, b) if ka == "ok" else [])
                if diffs:
                    differing += 1
                    print(f"DIFF {path} {opts}:\n  " + "\n  ".join(diffs))
            ca, cb = claimed(ref.analyze.discover, path), claimed(new_discover, path)
            if ca != cb:
                differing += 1
                print(f"DIFF discovery {path}: {ca} != {cb}")
            else:  # whichever loader claims it, what it reads is the same
                (ka, a), (kb, b) = (outcome(lambda p, o: mod.discover_runs(p, o), opts_cls, path, {})
                                    for mod, opts_cls in ((ref.analyze.discover, old_opts), (new_discover, LoadOptions)))
                if ka == kb == "ok":  # event lines now say their line before their source: same columns
                    for ra, rb in zip(a, b):
                        if set(ra.events.columns) == set(rb.events.columns):
                            rb.events = rb.events[list(ra.events.columns)]
                diffs = [f"{ka} != {kb}"] if ka != kb else run_diff(a, b) if ka == "ok" else []
                if diffs:
                    differing += 1
                    print(f"DIFF discover_runs {path}:\n  " + "\n  ".join(diffs))
        n = len(paths)
        print(f"{n} files x {len(OPTION_SETS)} option sets = {compared} loads compared, discovery of {n} files; "
              f"{differing} differences")
        return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
