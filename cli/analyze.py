"""``sentinel analyze``: a thin layer over :func:`sentinel.analyze`."""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import os
import sys

import click

# Exit codes: 0 analysed; 1 nothing could be analysed (click's error exit); 2 usage error
# (click's own); 3 an incident at or above --fail-on was found.
EXIT_NOTHING = 1
EXIT_USAGE = 2
EXIT_FAIL_ON = 3

# Set once a report was written (the console script then exits without the interpreter's
# teardown: see sentinel.cli.main).
report_written = False
# Set by the command group: the command runs as a process of its own (the console script), not
# inside a caller's process (tests, CliRunner).
own_process = False

# Paths that are the standard output: a PNG written there would be mixed into the report.
_STDOUT_NAMES = frozenset({"-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"})


class _AnalyzeCommand(click.Command):
    """Reports click's own usage errors as JSON on stdout when ``--format json`` was asked for."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)  # the parser consumes ``args``
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as err:
            if not _wants_json(given):
                raise
            _echo_json_error(err.format_message(), EXIT_USAGE)
            ctx.exit(EXIT_USAGE)


def _wants_json(args: list[str]) -> bool:
    return any(a == "--format=json" or (a == "--format" and b == "json") for a, b in zip(args, [*args[1:], ""]))


def _echo_json_error(message: str, code: int) -> None:
    click.echo(json.dumps({"error": message, "exit_code": code}))


@click.command("analyze", cls=_AnalyzeCommand)
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True, help="How to print the report.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write a PNG of the runs with the incidents marked (a file, .png added to a name "
                   "without an extension; not standard output).")
@click.option("--fail-on", type=click.Choice(["warning", "critical"]), default=None,
              help="Exit with code 3 when an incident of this severity or worse was found.")
@click.option("--window", type=int, default=None, help="Spike detector window (default: the guard's).")
@click.option("--threshold", type=float, default=None,
              help="Spike detector threshold in robust sigmas (default: the guard's).")
@click.option("--warmup", type=int, default=None, help="Spike detector warm-up in values (default: the guard's).")
@click.option("--step-col", default=None, help="Step column of a table, when not recognised.")
@click.option("--loss-col", default=None, help="Loss column, TensorBoard tag or text-log key, when not recognised.")
@click.option("-v", "--verbose", is_flag=True, help="List every file a directory walk did not analyse, with why.")
def analyze(paths: tuple[str, ...], fmt: str, plot: str | None, fail_on: str | None,
            window: int | None, threshold: float | None, warmup: int | None,
            step_col: str | None, loss_col: str | None, verbose: bool) -> None:
    """Explain what happened in training runs: loss spikes, divergence, grad-norm explosions,
    non-finite steps, loss-scale collapse, attention entropy collapse, plateaus, and what the
    guard did about them.

    PATHS are sentinel run directories, TensorBoard log directories, Lightning metrics.csv
    files, trackers' stores (W&B, MLflow, DVCLive, Ray), text logs of many trainers, tables,
    or directories holding many runs (`sentinel formats` lists every format). A directory walk
    never reads source code, packaging output or tool directories (.git, .venv) as logs; it
    counts what it skipped (-v lists it). A path that cannot be read is a warning; the others
    are still analysed.

    Exit codes: 0 analysed, 1 nothing could be analysed, 2 usage error, 3 an incident at or
    above --fail-on was found (the incidents are listed on stderr, or under "fail_on" in JSON).
    """
    # The report carries every warning the library logs; no second copy on stderr.
    logging.getLogger("sentinel").addHandler(logging.NullHandler())
    thresholds = {k: v for k, v in (("window", window), ("threshold", threshold), ("warmup", warmup)) if v is not None}
    try:
        _check_thresholds(thresholds)
        _analyze(paths, fmt, plot, fail_on, verbose, step_col=step_col, loss_col=loss_col, thresholds=thresholds)
    except click.ClickException as err:
        if fmt != "json":
            raise
        _echo_json_error(err.format_message(), err.exit_code)
        click.get_current_context().exit(err.exit_code)
    except (click.exceptions.Exit, click.exceptions.Abort):  # the command's own ending (an exit code)
        raise
    except Exception as err:  # noqa: BLE001 - a bug of sentinel's: one line, not a traceback
        if os.environ.get("SENTINEL_DEBUG"):
            raise
        message = (f"internal error while analysing ({type(err).__name__}: {' '.join(str(err).split())[:300]}); "
                   "this is a bug in sentinel: please report it with the log, and set SENTINEL_DEBUG=1 "
                   "to see the traceback")
        if fmt == "json":
            _echo_json_error(message, EXIT_NOTHING)
        else:
            click.echo(f"Error: {message}", err=True)
        click.get_current_context().exit(EXIT_NOTHING)


def _analyze(paths: tuple[str, ...], fmt: str, plot: str | None, fail_on: str | None, verbose: bool,
             step_col: str | None, loss_col: str | None, thresholds: dict) -> None:
    from sentinel.analyze.read_ahead import reading_ahead

    if plot is not None:
        _check_plot_path(plot)
    if own_process:
        keep_freed_memory()
    if "numpy" not in sys.modules:
        # The analysis does no linear algebra, yet numpy's OpenBLAS starts a thread per core
        # when it loads: ~60 ms of a 2-core start-up. One thread, unless the user chose.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    with _stdin_as_file(paths) as (paths, stdin_file), reading_ahead(paths):
        # a run directory's steps are parsed while pandas loads
        with _no_cycle_collection():  # importing pandas makes ~10^5 objects, none of them garbage
            import sentinel.analyze.analyzer  # noqa: F401
        _analyze_and_print(paths, fmt, plot, fail_on, verbose, step_col, loss_col, thresholds, stdin_file)


STDIN = "<stdin>"


@contextlib.contextmanager
def _stdin_as_file(paths: tuple[str, ...]):
    """``-`` among the paths: standard input (a piped or pasted log, ``pbpaste | sentinel analyze
    -``), copied into a temporary file for the analysis, which names it ``<stdin>``. Yields the
    paths with ``-`` replaced, and that file (None without ``-``)."""
    if "-" not in paths:
        yield paths, None
        return
    import shutil
    import tempfile
    from pathlib import Path

    from sentinel.analyze.compressed import suffix_of

    stream = getattr(sys.stdin, "buffer", None)
    if stream is None:
        raise click.ClickException("'-' reads the log from standard input, and this process has none: pass a file")
    if sys.stdin.isatty():  # waiting for a paste: say so, rather than seem to hang
        click.echo("reading a log from standard input: paste it, then Ctrl-D (Ctrl-Z Enter on Windows)", err=True)
    head = stream.read(1 << 16)
    if not head:
        raise click.ClickException("standard input is empty: pipe a log into it (cat train.log | sentinel analyze -) "
                                   "or pass a file")
    with tempfile.TemporaryDirectory(prefix="sentinel-") as tmp:
        folder = Path(tmp) / "stdin"
        folder.mkdir()
        file = folder / ("stdin" + suffix_of(head))  # a log piped in compressed is read as such
        try:
            with open(file, "wb") as out:
                out.write(head)
                shutil.copyfileobj(stream, out, 1 << 20)
        except OSError as err:  # a full disk: the user's to fix, not a bug
            raise click.ClickException(f"cannot keep standard input in a temporary file under {tmp!r} "
                                       f"({err.strerror or err}): set TMPDIR to a folder with room, or pass "
                                       "the log as a file") from None
        os.utime(file, (0, 0))  # the input has ended: its last line is whole, even without a line end
        yield tuple(str(file) if p == "-" else p for p in paths), str(file)


def keep_freed_memory() -> bool:
    """Tell glibc's allocator to keep the memory this process frees for its next allocations;
    True when it was told (glibc only; elsewhere nothing changes).

    An analysis makes many short-lived arrays of a few MB. By default glibc gives such blocks
    back to the system when they are freed, and the next one is fresh pages, each a page fault
    (a 1M-step analysis: ~65,000 faults, 0.3-0.7 s of system time on a 2-core VM). Kept, they
    are reused: ~12,000 fewer faults, about 10% less wall time on TensorBoard event files. Only
    ``sentinel analyze`` as its own process does this; ``sentinel.analyze()`` in a caller's
    process leaves the caller's allocator alone.

    Example:
        >>> keep_freed_memory()  # doctest: +SKIP
        True
    """
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    # Blocks under 32 MB come from the heap, not mmap (M_MMAP_THRESHOLD, the most glibc allows);
    # the heap's top is given back only beyond 1 GB free (M_TRIM_THRESHOLD).
    return bool(mallopt(_M_MMAP_THRESHOLD, 32 << 20)) and bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h


@contextlib.contextmanager
def _no_cycle_collection():
    """The cyclic garbage collector paused within the block (~10% of pandas' import time goes
    to collections that find nothing), as it was after it."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _analyze_and_print(paths: tuple[str, ...], fmt: str, plot: str | None, fail_on: str | None, verbose: bool,
                       step_col: str | None, loss_col: str | None, thresholds: dict,
                       stdin_file: str | None = None) -> None:
    from sentinel.analyze.analyzer import AnalyzeError, analyze as run_analysis
    from sentinel.analyze.discover import skip_summary
    from sentinel.analyze.render.json_report import render_json
    from sentinel.analyze.render.markdown import render_markdown
    from sentinel.analyze.render.table import clean_text, render_table

    try:
        report = run_analysis(*paths, step_col=step_col, loss_col=loss_col, **thresholds)
    except AnalyzeError as err:
        message = str(err) if stdin_file is None else str(err).replace(stdin_file, STDIN)
        raise click.ClickException(message) from err
    if stdin_file is not None:  # its temporary copy is no place to name
        for run in report.runs:
            if run.path == stdin_file:
                run.path = STDIN
        report.problems = [p.replace(stdin_file, STDIN) for p in report.problems]
    notes = [f"warning: {p}" for p in report.problems]
    notes += [f"warning: skipped {s.detail}" for s in report.skipped if s.problem]
    quiet = [s for s in report.skipped if not s.problem]
    if quiet:
        notes.append(skip_summary(quiet) + ("" if verbose else " (use -v to list them)"))
        if verbose:
            notes += [f"  {s.detail or f'{s.path}: {s.reason}'}" for s in quiet]
    met = [(run, i) for run in report.runs for i in run.incidents
           if fail_on is not None and i.severity.rank >= _rank(fail_on)]
    if plot is not None:
        plot, plot_error = _write_plot(report, plot)
        notes.append(f"warning: plot not written: {plot_error}" if plot_error else f"plot written to {plot}")
    if fmt == "json":
        extra = {"problems": report.problems,
                 "skipped": [{"path": s.path, "reason": s.reason, **({"detail": s.detail} if s.detail else {})}
                             for s in report.skipped]}
        if plot is not None:
            extra["plot"] = {"path": plot, "written": plot_error is None, "error": plot_error}
        if fail_on is not None:
            extra["fail_on"] = {"severity": fail_on, "met": bool(met),
                                "incidents": [{"run": run.name, "path": run.path, **i.to_dict()} for run, i in met]}
        text = render_json(report, extra=extra)
    else:
        text = (render_table if fmt == "table" else render_markdown)(report)
    click.echo(text, nl=False)
    global report_written
    report_written = True
    say = (lambda line: None) if fmt == "json" else (lambda line: click.echo(clean_text(line), err=True))
    for line in notes:
        say(line)
    if met:
        say(f"--fail-on {fail_on} met by {len(met)} incident(s):")
        for run, i in met:
            span = f"{i.step}" if i.step == i.end_step else f"{i.step}-{i.end_step}"
            say(f"  {run.name} step {span} {i.severity.value} {i.kind}: {i.message}")
        click.get_current_context().exit(EXIT_FAIL_ON)


def _check_thresholds(thresholds: dict) -> None:
    """Refuse, before any reading, a detector option the detector cannot take: a usage error
    (exit 2) naming the option and the values it takes."""
    if not thresholds:
        return
    from sentinel.analyze.config import AnalyzeConfig, InvalidThreshold
    from sentinel.analyze.detector import warmup_steps

    try:
        warmup_steps(AnalyzeConfig.from_kwargs(**thresholds))
    except InvalidThreshold as err:
        raise click.BadParameter(str(err), param_hint=f"'--{err.name}'") from err


def _rank(severity: str) -> int:
    from sentinel.analyze.incident import Severity

    return Severity(severity).rank


def _check_plot_path(plot: str) -> None:
    """Refuse, before any analysis, a plot path that is standard output or in no directory."""
    if plot in _STDOUT_NAMES or _is_stdout(plot):
        raise click.UsageError("--plot cannot write to standard output: the report goes there; "
                               "pass a file name such as report.png")
    parent = os.path.dirname(os.path.abspath(plot))
    if not os.path.isdir(parent):
        raise click.UsageError(f"--plot: directory '{parent}' does not exist: create it or pass another path")


def _is_stdout(plot: str) -> bool:
    try:
        out = os.fstat(sys.stdout.fileno())
        target = os.stat(plot)
    except (OSError, ValueError, AttributeError):  # no such file, or stdout is not a real file
        return False
    return (out.st_dev, out.st_ino) == (target.st_dev, target.st_ino)


def _write_plot(report, plot: str) -> tuple[str, str | None]:
    """Write the plot: the path written (``.png`` added to a name without an extension) and the
    error as one line when it fails (a warning: the analysis stands)."""
    from sentinel.analyze.render.plot import render_plot

    try:
        return str(render_plot(report, plot)), None
    except (ValueError, OSError, RuntimeError, OverflowError) as err:
        return plot, " ".join(str(err).split())
