"""Entry point of the ``sentinel`` console script."""

import click

from sentinel import __version__
from sentinel.cli.analyze import analyze
from sentinel.cli.demo_command import demo


@click.group()
@click.version_option(__version__, prog_name="sentinel")
def main() -> None:
    """sentinel: training-stability diagnostics for PyTorch and Lightning."""


main.add_command(analyze)
main.add_command(demo)
