"""The lines of one rank, where a launcher interleaved several ranks' output.

Every rank of a data-parallel run prints the loss of its own shard; read together, two ranks'
losses alternate between two levels (a spike at every other step). Launchers and loggers put the
rank before each line, each in its own syntax (:data:`SYNTAXES`); where two or more ranks print,
the lowest rank's lines are read.

Example:
    >>> notes = []
    >>> one_rank("0: loss 2.0\\n1: loss 3.0\\n" * 4, notes).splitlines()[:2], notes[0][:34]
    (['0: loss 2.0', ''], "2 ranks' output interleaved (0, 1)")
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from sentinel.analyze.loaders.log_lines import Lines


@dataclass(frozen=True)
class RankSyntax:
    """How one launcher or logger marks a line with its rank.

    Attributes:
        name: the tool that writes it.
        marks: strings one of which every text with this prefix holds (the quick test, asked of
            the text's distinct lines).
        prefix: the prefix from a line's start, ``{rank}`` where the rank's digits are.
        every_rank: the ranks are numbered 0..n-1 and each prints several lines (a prefix that is
            only a number could be a step's).
        in_order: the "rank" is a process id: the first to print comes first, not the lowest.
        removed: a prefix that marks every line of a process and nothing else (no step's number can
            be one): taken off the kept rank's lines where no reader takes the lines as they are
            (:func:`one_rank_unprefixed`), so that the readers of lines that start with their record
            find them.

    Example:
        >>> mpirun = next(s for s in SYNTAXES if s.name == "mpirun")
        >>> text = "[1,0]<stdout>:loss 2.0\\n[1,1]<stdout>:loss 3.0\\n"
        >>> mpirun.ranks(text), mpirun.others_blanked(text, keep=0).splitlines()
        ([0, 1], ['[1,0]<stdout>:loss 2.0', ''])
    """

    name: str
    marks: tuple[str | re.Pattern, ...]
    prefix: str
    every_rank: bool = False
    in_order: bool = False
    removed: bool = False

    def ranks(self, text: str, lines: Lines | None = None) -> list[int]:
        """The ranks named at line starts, each once, lowest first (or first printed first);
        ``lines``: ``Lines(text)``, where the caller has them (a log of one rank's lines is told
        by counting)."""
        found = self._one_rank_alone(text, lines) if lines is not None else None
        if found is None:
            found = self._found(text, rest=False)
        # the distinct strings first: one int() a rank, not one a line (20,000 lines: 2 ms)
        ranks = list(dict.fromkeys(int(r) for r in dict.fromkeys(found))) if self.in_order else \
            sorted({int(r) for r in set(found)})
        if self.every_rank and (ranks != list(range(len(ranks))) or len(found) < 4 * len(ranks)):
            return []
        return ranks

    def _one_rank_alone(self, text: str, lines: Lines) -> list[str] | None:
        """Where every prefixed line has the first one's prefix (torchtitan's ``[rank0]:`` on each
        line), its rank once a line, from two counts; else None (reading each line's rank took
        2-3 ms on 20,000 lines)."""
        first = self._pattern(r"(\d+)", after_line_end=False).match(text) or \
            self._pattern(r"(\d+)", after_line_end=True).search(text)
        if first is None:
            return None
        prefix = first.group(0).lstrip("\n")
        same = text.count("\n" + prefix) + text.startswith(prefix)
        return [first.group(1)] * same if same == lines.count(self._line_start) else None

    @functools.cached_property
    def _line_start(self) -> re.Pattern:
        return re.compile("^" + self.prefix.format(rank=r"\d+"), re.MULTILINE)

    def lines_by_rank(self, text: str) -> dict[int, list[str]]:
        """Each rank's lines (what follows the prefix)."""
        lines: dict[int, list[str]] = {}
        for rank, line in self._found(text, rest=True):
            lines.setdefault(int(rank), []).append(line)
        return lines

    def others_blanked(self, text: str, keep: int) -> str:
        """``text`` with the lines of every rank but ``keep`` emptied (line numbers stay)."""
        other = rf"(?!{keep}\D)\d+"  # a rank's digits, not keep's alone
        return re.compile("^" + self.prefix.format(rank=other) + "[^\n]*", re.MULTILINE).sub("", text)

    def prefix_removed(self, text: str, rank: int | None = None) -> str:
        """``text`` with ``rank``'s prefix taken off its lines (every rank's where None)."""
        rank_pattern = r"\d+" if rank is None else f"{rank}(?!\\d)"
        text = re.compile(r"\A" + self.prefix.format(rank=rank_pattern)).sub("", text, count=1)  # the first line's
        return self._pattern(rank_pattern, after_line_end=True).sub("\n", text)

    def _found(self, text: str, rest: bool) -> list:
        """``findall`` at every line start: the first line asked apart, the others after their
        line end (a literal that Python's re searches for; "^" with MULTILINE would try every
        position of the text, 12 ms on 3 MB)."""
        first = self._pattern(r"(\d+)", after_line_end=False, rest=rest).match(text)
        found = self._pattern(r"(\d+)", after_line_end=True, rest=rest).findall(text)
        return ([first.groups() if rest else first.group(1)] if first else []) + found

    def _pattern(self, rank: str, after_line_end: bool, rest: bool = False) -> re.Pattern:
        return re.compile(("\n" if after_line_end else "^") + self.prefix.format(rank=rank)
                          + ("([^\n]*)" if rest else ""), 0 if after_line_end else re.MULTILINE)


SYNTAXES = (
    # torchrun --tee / --redirects ("[default0]:"), PyTorch's distributed logs and torchtitan ("[rank0]:").
    RankSyntax("torchrun", ("[rank", "[default"), r"\[(?:default|rank){rank}\]:", removed=True),
    # Open MPI's mpirun --tag-output ("[1,0]<stdout>:") and Horovod's gloo launcher ("[0]<stdout>:").
    RankSyntax("mpirun", ("]<stdout>:", "]<stderr>:"), r"\[(?:\d+,)?{rank}\]<std(?:out|err)>:", removed=True),
    # Ray's prefix on what its workers and actors print, "(RayTrainWorker pid=1234, ip=10.0.0.1) ",
    # "(pid=1234) ", "(train_fn pid=1234) ", coloured in a terminal's copy. A trial or worker is a
    # process: the first to print is read.
    RankSyntax("Ray", (" pid=", "(pid="), r"(?:\x1b?\[[\d;]*m)*\((?:[\w.]+ )?pid={rank}(?:, ip=[\d.]+)?\)"
               r"(?:\x1b?\[[\d;]*m)* ?", in_order=True, removed=True),
    # DeepSpeed's log_dist on several ranks: "[Rank 0] " after the logger's own prefix.
    RankSyntax("DeepSpeed", ("[Rank ",), r"[^\n]*?\[Rank {rank}\] "),
    # k2's icefall, its rank and world size after the logger's place: "2023-08-25 19:14:58,332 INFO
    # [train.py:878] (2/4) Epoch 1, batch 0, loss[loss=8.105, ...]".
    RankSyntax("icefall", (re.compile(r"\] \(\d+/\d+\) "),), r"[^\n]*?\] \({rank}/\d+\) "),
    # Slurm's srun --label: "0: ", right-aligned where there are ten tasks or more.
    RankSyntax("srun --label", (re.compile(r"^ *\d+: ", re.MULTILINE),), r" *{rank}: ", every_rank=True),
)


def one_rank(text: str, warnings: list[str], has_records: Callable[[str], bool] | None = None,
             lines: Lines | None = None) -> str:
    r"""The lines of one rank, where a launcher interleaved several ranks' output (each printing
    its own loss, its own data shard's): the lowest rank's lines and the lines of no rank are
    kept, the others blanked (line numbers stay), and a warning says so.

    Args:
        text: the log's text.
        warnings: where the warning goes.
        has_records: whether a rank's lines hold records; only such ranks count. Where one rank
            prints the records (Megatron's last pipeline stage) and every rank its start-up lines,
            nothing is blanked.
        lines: ``Lines(text)`` where the caller has them (the quick test asks their distinct lines).

    Example:
        >>> notes = []
        >>> one_rank("[rank0]:loss 2.0\n[rank1]:loss 3.0\n", notes).splitlines(), len(notes)
        (['[rank0]:loss 2.0', ''], 1)
    """
    lines = Lines.of(text, lines)
    for syntax in SYNTAXES:
        if not lines.holds_any(syntax.marks):  # most logs stop here
            continue
        ranks = syntax.ranks(text, lines)
        if len(ranks) >= 2 and has_records is not None:
            by_rank = syntax.lines_by_rank(text)
            ranks = [r for r in ranks if has_records("\n".join(by_rank[r]))]
        if len(ranks) < 2:
            continue
        keep = ranks[0]
        warnings.append(f"{len(ranks)} ranks' output interleaved ({', '.join(str(r) for r in ranks[:8])}"
                        f"{', ...' if len(ranks) > 8 else ''}): rank {keep}'s lines are read, each rank prints its "
                        "own loss")
        return syntax.others_blanked(text, keep)
    return _one_host(text, warnings, has_records, lines)


# The start of a text in which a prefix is looked for (a launcher's prefix marks every line of a
# process from its first; a search of a whole bar log's text, each time it is sniffed or read, cost
# a fifth of its read).
_HEAD = 1 << 18


# Ray's note where it printed a line once for several workers that printed it alike (and, the first
# time, why): the line's own values are those the worker printed.
_RAY_REPEATED = re.compile(r" ?\[repeated \d+x across cluster\](?: \(Ray deduplicates logs[^\n]*)?")


def prefixes_removed(text: str) -> str:
    """``text`` with the prefix of every rank taken off its lines, where a launcher marks every line of
    a process (torchrun, mpirun, Ray: :func:`one_rank_unprefixed`'s); the same object where none does.
    For what a refusal says of the lines, whichever rank printed them.

    Example:
        >>> prefixes_removed("[rank1]:step 1 loss 2.0\\n[rank0]:step 1 loss 2.1\\n")
        'step 1 loss 2.0\\nstep 1 loss 2.1\\n'
    """
    head = text[:_HEAD]
    for syntax in SYNTAXES:
        if syntax.removed and any(mark in head for mark in syntax.marks) and syntax.ranks(text):
            text = syntax.prefix_removed(text)
    return text


def one_rank_unprefixed(text: str, warnings: list[str],
                        records_in: Callable[[str], Callable[[str], bool] | None]) -> str:
    r"""The lines of one rank with their launcher's prefix taken off, where every line of a process
    starts with it (torchrun's ``[rank0]:``, mpirun's ``[1,0]<stdout>:``, Ray's ``(RayTrainWorker
    pid=1234)``): a reader of lines that start with their record (the PyTorch quickstart's
    ``loss: 2.30  [    0/60000]``) reads them then. ``records_in`` is asked of every rank's lines
    with their prefix off, together: whether a reader finds records there, and if so, how to ask
    one rank's lines whether they hold any (a rank that prints fewer lines than a reader needs on
    its own still prints records). The rank kept is the first whose lines hold records; where two
    or more do, the others' lines are blanked (line numbers stay) and a warning says so. A text
    without such a prefix, or whose ranks hold no records, is given back as it is (the same object).

    Example:
        >>> notes = []
        >>> text = "(RayTrainWorker pid=7) loss: 2.1\n(RayTrainWorker pid=3) loss: 2.4\n"
        >>> one_rank_unprefixed(text, notes, lambda t: lambda rank: "loss" in rank).splitlines(), notes[0][:41]
        (['loss: 2.1', ''], "2 processes' output interleaved (pid 7, 3")
    """
    head = text[:_HEAD]
    for syntax in SYNTAXES:
        if not syntax.removed or not any(mark in head for mark in syntax.marks):
            continue
        ranks = syntax.ranks(text)
        if not ranks:
            continue
        by_rank = syntax.lines_by_rank(text)
        has_records = records_in("\n".join(line for rank in ranks for line in by_rank[rank]))
        ranks = [rank for rank in ranks if has_records is not None and has_records("\n".join(by_rank[rank]))]
        if not ranks:
            return text
        keep = ranks[0]
        if len(ranks) >= 2:
            text = syntax.others_blanked(text, keep)
            shown = ", ".join(str(r) for r in ranks[:8]) + (", ..." if len(ranks) > 8 else "")
            warnings.append(f"{len(ranks)} processes' output interleaved (pid {shown}): pid {keep}'s lines are read "
                            "(each worker or trial prints its own)" if syntax.in_order else
                            f"{len(ranks)} ranks' output interleaved ({shown}): rank {keep}'s lines are read, each "
                            "rank prints its own loss")
        text = syntax.prefix_removed(text, keep)
        return _RAY_REPEATED.sub("", text) if syntax.in_order and "across cluster]" in text else text
    return text


# pdsh, DeepSpeed's and LLaMA-Factory's multi-node launcher: each node's lines after its address or
# host name, "10.96.202.43: {'loss': 1.8673, ...}", "worker-1: ..." (a name with a digit and a '-' or
# '.', so that no "Epoch: " or "INFO: " is one).
_HOST = r"(?:\d{1,3}(?:\.\d{1,3}){3}|(?=[\w.-]{0,80}?\d)[A-Za-z]\w{0,40}(?:[-.]\w{1,40}){1,6})"  # (bounded)
_HOST_LINE = re.compile(rf"^({_HOST}): ([^\n]*)", re.MULTILINE)


def _one_host(text: str, warnings: list[str], has_records: Callable[[str], bool] | None, lines: Lines) -> str:
    """The lines of one node, where pdsh put each node's address before its lines and two or more
    nodes print records (each node's copy of the same logs, or its own): the first node's lines and
    the lines of none are kept, the others blanked, with a warning.

    Example:
        >>> notes = []
        >>> one_host_text = "10.0.0.1: step 1 loss 2.0\\n10.0.0.2: step 1 loss 2.0\\n" * 4
        >>> one_rank(one_host_text, notes).splitlines()[:2], notes[0][:31]
        (['10.0.0.1: step 1 loss 2.0', ''], "2 nodes' output interleaved (10")
    """
    if not lines.holds_any((_HOST_LINE,)):
        return text
    by_host: dict[str, list[str]] = {}
    for host, line in _HOST_LINE.findall(text):
        by_host.setdefault(host, []).append(line)
    hosts = [h for h, found in by_host.items() if len(found) >= 4
             and (has_records is None or has_records("\n".join(found)))]
    if len(hosts) < 2:
        return text
    keep = hosts[0]
    warnings.append(f"{len(hosts)} nodes' output interleaved ({', '.join(hosts[:4])}{', ...' if len(hosts) > 4 else ''}): "
                    f"{keep}'s lines are read")
    others = "|".join(re.escape(h) for h in by_host if h != keep)
    return re.sub(rf"^(?:{others}): [^\n]*", "", text, flags=re.MULTILINE)

