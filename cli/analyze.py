"""``sentinel analyze``: a thin layer over :func:`sentinel.analyze`."""

from __future__ import annotations

import click

# Exit codes: 0 analysed; 1 nothing could be analysed (click's error exit); 2 --fail-on met.
EXIT_FAIL_ON = 2


@click.command("analyze")
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=str))
@click.option("--format", "fmt", type=click.Choice(["table", "json", "markdown"]), default="table",
              show_default=True, help="How to print the report.")
@click.option("--plot", "plot", type=click.Path(dir_okay=False, path_type=str), default=None,
              help="Also write a PNG of the runs with the incidents marked.")
@click.option("--fail-on", type=click.Choice(["warning", "critical"]), default=None,
              help="Exit with code 2 when an incident of this severity or worse was found.")
@click.option("--window", type=int, default=None, help="Spike detector window (default: the guard's).")
@click.option("--threshold", type=float, default=None,
              help="Spike detector threshold in robust sigmas (default: the guard's).")
@click.option("--warmup", type=int, default=None, help="Spike detector warm-up in values (default: the guard's).")
@click.option("--step-col", default=None, help="Step column of a table, when not recognised.")
@click.option("--loss-col", default=None, help="Loss column (or TensorBoard tag), when not recognised.")
def analyze(paths: tuple[str, ...], fmt: str, plot: str | None, fail_on: str | None,
            window: int | None, threshold: float | None, warmup: int | None,
            step_col: str | None, loss_col: str | None) -> None:
    """Explain what happened in training runs: loss spikes, divergence, grad-norm explosions,
    non-finite steps, loss-scale collapse, attention entropy collapse, plateaus, and what the
    guard did about them.

    PATHS are sentinel run directories, TensorBoard log directories, Lightning metrics.csv
    files, Megatron/llm.c logs or tables, or directories holding many runs.

    Exit codes: 0 analysed, 1 nothing could be analysed, 2 an incident at or above
    --fail-on was found.
    """
    from sentinel.analyze.analyzer import AnalyzeError, analyze as run_analysis
    from sentinel.analyze.render.json_report import render_json
    from sentinel.analyze.render.markdown import render_markdown
    from sentinel.analyze.render.table import render_table

    thresholds = {k: v for k, v in (("window", window), ("threshold", threshold), ("warmup", warmup))
                  if v is not None}
    try:
        report = run_analysis(*paths, step_col=step_col, loss_col=loss_col, **thresholds)
    except AnalyzeError as err:
        raise click.ClickException(str(err)) from err
    render = {"table": render_table, "json": render_json, "markdown": render_markdown}[fmt]
    click.echo(render(report), nl=False)
    if plot is not None:
        from sentinel.analyze.render.plot import render_plot

        try:
            render_plot(report, plot)
        except (ValueError, OSError) as err:
            raise click.ClickException(f"plot not written: {err}") from err
        click.echo(f"plot written to {plot}", err=True)
    if fail_on is not None and report.has_at_least(fail_on):
        click.get_current_context().exit(EXIT_FAIL_ON)
