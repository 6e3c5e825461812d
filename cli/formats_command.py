"""``sentinel formats``: every log format ``sentinel analyze`` reads, one per line."""

from __future__ import annotations

import click


def format_lines() -> list[str]:
    """The formats the installed loaders read, in the order a file is offered to them; a loader
    of many dialects (the text logs) lists each under its own line.

    Example:
        >>> lines = format_lines()
        >>> lines[0], any("TensorBoard event files" in line for line in lines)
        ('- sentinel run directory (meta.json + steps.*)', True)
    """
    from sentinel.analyze.discover import loaders

    lines = []
    for module in loaders():
        lines.append(f"- {getattr(module, 'DESCRIPTION', module.NAME)}")
        lines.extend(f"    - {sub}" for sub in getattr(module, "FORMATS", ()))
    return lines


@click.command("formats")
def formats() -> None:
    """List the log formats `sentinel analyze` reads (a file, or a directory walked for them)."""
    click.echo("sentinel analyze reads, in the order a file is offered to each reader:")
    for line in format_lines():
        click.echo(line)
    click.echo("A file named on its own, also: a short paste of a few such lines; numbers with no header, "
               "one per line (the loss) or two (a step and the loss), as np.savetxt writes them; one printed "
               "list of losses (print(losses) of a list, an array or tensors); a loss history saved with np.save "
               "(.npy) or np.savez (.npz), read without unpickling; a CSV / TSV table under a few lines that are "
               "no table (a notebook's Trainer table under its progress line).")
    click.echo("A text log whose loss goes by another key (avg_loss, Loss/train, gpt_loss) is read by that key, "
               "or by a perplexity's logarithm, with a warning.")
    click.echo("Any text log: libraries' NaN messages (anomaly mode, 'Loss is nan, stopping training') and a "
               "traceback at its end are reported.")
    click.echo("A table of one metric's step and value, named after it (train_loss.csv: step,value), is read "
               "as the loss, with a warning.")
    click.echo("A table with other column names: --step-col and --loss-col.")
