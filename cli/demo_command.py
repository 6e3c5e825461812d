"""``sentinel demo``: train a tiny GPT through injected instabilities, without and with the guard."""

from __future__ import annotations

import textwrap

import click


@click.command("demo")
@click.option("--out", default="logs/demo", show_default=True, type=click.Path(file_okay=False),
              help="Directory for the two runs and report.png.")
@click.option("--steps", default=400, show_default=True, type=click.IntRange(min=100),
              help="Optimizer steps per run (the faults move in proportion).")
@click.option("--progress/--no-progress", default=True, show_default=True, help="Show progress bars.")
def demo(out: str, steps: int, progress: bool) -> None:
    """Train a tiny GPT on CPU twice through a bad-data stretch and a learning-rate surge:
    first recording only, then with the guard. Then analyze both runs and plot them.
    """
    from pathlib import Path

    from sentinel.analyze import analyze, render_plot, render_table
    from sentinel.cli.demo.run import GUARDED, UNGUARDED, DemoRun, fault_steps, prepare_out, run_demo, scenario_for

    try:
        prepare_out(out)
    except ValueError as err:
        raise click.ClickException(str(err)) from err
    scenario = scenario_for(steps)
    bad_steps, surge_steps = fault_steps(scenario)
    click.echo(textwrap.fill(f"sentinel demo: a tiny GPT trained twice for {steps} steps on CPU (float64: the "
                             "same figures on every CPU), through "
                             f"{len(scenario.bad.positions)} bad batches (steps {bad_steps}) and a "
                             f"{scenario.surge.factor:g}x learning-rate surge (steps {surge_steps}).", width=100))

    def announce(run: DemoRun) -> None:
        click.echo()
        click.echo(f"{run.title}  ->  {Path(out) / run.name}")
        click.echo(textwrap.fill(run.look_for, width=96, initial_indent="  look for: ",
                                 subsequent_indent="            "))

    try:
        result = run_demo(out, steps=steps, progress=progress, announce=announce)
    except ValueError as err:  # e.g. an --out that cannot be written
        raise click.ClickException(str(err)) from err
    report = analyze(str(Path(out) / UNGUARDED), str(Path(out) / GUARDED))
    click.echo()
    click.echo(f"sentinel analyze {Path(out) / UNGUARDED} {Path(out) / GUARDED}:")
    click.echo()
    click.echo(render_table(report), nl=False)
    plot = Path(out) / "report.png"
    render_plot(report, plot)
    click.echo()
    for name, loss in result.final_loss.items():
        click.echo(f"{name}: final loss {loss:.3f}")
    click.echo(f"The guard rolled back {result.rollbacks} time(s). Plot: {plot}  "
               f"({result.seconds:.0f} s of training)")
    click.echo(f"Explore: sentinel analyze {out} --format markdown")
