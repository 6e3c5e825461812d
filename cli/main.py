"""Entry point of the ``sentinel`` console script."""

from __future__ import annotations

import atexit
import logging
import os
import sys
from typing import Any

import click

from sentinel import __version__
from sentinel.cli import analyze as analyze_command
from sentinel.cli.analyze import analyze
from sentinel.cli.demo_command import demo
from sentinel.cli.formats_command import formats


class _Main(click.Group):
    """The command group; as the console script, ``sentinel analyze`` ends without teardown.

    Once its report is written, a ``sentinel analyze`` process has nothing left to do, yet the
    interpreter's teardown (freeing the modules of pandas, pyarrow and numpy) took ~0.1 s of
    each analysis. So when the group runs as a process of its own (``args`` taken from
    ``sys.argv``, as the console script does; never when called with arguments, as tests and
    ``CliRunner`` do), it runs the exit handlers, flushes the standard streams and leaves with
    ``os._exit``. When a flush fails, the usual exit reports it. As its own process, ``sentinel
    analyze`` also keeps the memory it frees for reuse (:func:`sentinel.cli.analyze.keep_freed_memory`).
    """

    def main(self, args: Any = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        own_process = args is None and standalone_mode
        analyze_command.report_written = False
        analyze_command.own_process = own_process
        try:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        except SystemExit as done:
            if own_process and analyze_command.report_written and isinstance(done.code, (int, type(None))):
                _exit_now(done.code or 0)
            raise


def _exit_now(code: int) -> None:
    """Run the exit handlers, flush the standard streams and end the process with ``code``;
    return (for the usual exit) when a stream cannot be flushed."""
    try:
        atexit._run_exitfuncs()  # logging's flush, anything a library registered
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(code)


@click.group(cls=_Main)
@click.version_option(__version__, prog_name="sentinel")
def main() -> None:
    """sentinel: training-stability diagnostics for PyTorch and Lightning."""


main.add_command(analyze)
main.add_command(demo)
main.add_command(formats)
