"""Demo data: a generated English-like corpus, a character tokenizer, windows, and bad batches.

The corpus comes from a tiny seeded grammar (subject-verb agreement, adjectives, prepositional
phrases, paragraphs), so nothing is downloaded and every run sees the same text.

Batches are dicts ``{"x": (B, T) long, "y": (B, T) long, "index": (B,) long}``: ``index`` holds
the dataset index of each window, which is what the guard records when it skips a batch (see
``sentinel.guard.batch_id``).

Bad data (pathology 1 of the demo) lives in the data: :class:`BadBatches` names the batch
positions (0-based, the order in which the loader yields them, i.e. the optimizer step that
consumes them when there is no gradient accumulation) to corrupt; :func:`make_loader` turns
them into the dataset indices of those batches under the seeded sampler and wraps the dataset
so that exactly those samples come back corrupted. Skipping the batches therefore really
removes the bad data; a later epoch would serve the same bad samples again, as a real dataset
would.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Sampler

#: Ways a batch can be corrupted.
#: ``random``: inputs and targets replaced by uniform random tokens (noise text).
#: ``constant``: inputs and targets all one token (repeated garbage, e.g. a padding run).
#: ``shuffle``: clean inputs, targets shuffled along the sequence (misaligned labels).
CORRUPTION_MODES = ("random", "constant", "shuffle")

_DETERMINERS_SG = ("the", "a", "every", "one", "that")
_DETERMINERS_PL = ("the", "some", "many", "two", "these", "all the")
_ADJECTIVES = ("old", "small", "quiet", "brave", "red", "tired", "clever", "green", "cold", "happy")
_NOUNS = ("dog", "cat", "farmer", "river", "child", "bird", "king", "garden", "horse", "teacher",
          "ship", "wolf", "baker", "tree")
_IRREGULAR_PLURALS = {"child": "children", "wolf": "wolves"}
_VERBS = (("sees", "see"), ("likes", "like"), ("follows", "follow"), ("finds", "find"),
          ("watches", "watch"), ("helps", "help"), ("calls", "call"), ("remembers", "remember"))
_INTRANSITIVE = (("sleeps", "sleep"), ("waits", "wait"), ("sings", "sing"), ("runs", "run"),
                 ("rests", "rest"))
_PREPOSITIONS = ("in", "near", "behind", "under", "beside", "across")
_PLACES = ("the garden", "the river", "the old house", "the hill", "the market", "the forest",
           "the village", "the bridge")
_ADVERBS = ("slowly", "again", "at night", "every morning", "without a word", "before noon")


def generate_corpus(num_chars: int = 300_000, seed: int = 0) -> str:
    """Deterministic English-like text from a small grammar, at least ``num_chars`` long.

    Sentences agree in number (``the dog sees`` / ``the dogs see``), so a model must carry the
    subject to the verb: a character model learns spelling quickly and agreement later.

    Example:
        >>> text = generate_corpus(200, seed=0)
        >>> len(text) >= 200 and text == generate_corpus(200, seed=0)
        True
    """
    if num_chars < 1:
        raise ValueError(f"num_chars must be positive, got {num_chars!r}")
    rng = random.Random(seed)
    parts: list[str] = []
    length = 0
    while length < num_chars:
        paragraph = " ".join(_sentence(rng) for _ in range(rng.randint(3, 6))) + "\n"
        parts.append(paragraph)
        length += len(paragraph)
    return "".join(parts)


def _noun_phrase(rng: random.Random, plural: bool) -> str:
    det = rng.choice(_DETERMINERS_PL if plural else _DETERMINERS_SG)
    noun = rng.choice(_NOUNS)
    if plural:
        noun = _IRREGULAR_PLURALS.get(noun, noun + ("es" if noun.endswith("sh") else "s"))
    adjective = rng.choice(_ADJECTIVES) + " " if rng.random() < 0.4 else ""
    return f"{det} {adjective}{noun}"


def _clause(rng: random.Random) -> str:
    plural = rng.random() < 0.5
    subject = _noun_phrase(rng, plural)
    if rng.random() < 0.3:
        verb = rng.choice(_INTRANSITIVE)[1 if plural else 0]
        clause = f"{subject} {verb}"
    else:
        verb = rng.choice(_VERBS)[1 if plural else 0]
        clause = f"{subject} {verb} {_noun_phrase(rng, rng.random() < 0.5)}"
    if rng.random() < 0.4:
        clause += f" {rng.choice(_PREPOSITIONS)} {rng.choice(_PLACES)}"
    if rng.random() < 0.25:
        clause += f" {rng.choice(_ADVERBS)}"
    return clause


def _sentence(rng: random.Random) -> str:
    text = _clause(rng)
    if rng.random() < 0.3:
        text += f", and {_clause(rng)}"
    return text[0].upper() + text[1:] + "."


class CharTokenizer:
    """Character-level tokenizer over the characters of a text (ids in sorted character order).

    Example:
        >>> tok = CharTokenizer("abca")
        >>> tok.encode("cab").tolist(), tok.decode([2, 0, 1]), tok.vocab_size
        ([2, 0, 1], 'cab', 3)
    """

    def __init__(self, text: str) -> None:
        if not text:
            raise ValueError("CharTokenizer needs a non-empty text to take its characters from")
        self.chars = sorted(set(text))
        self._ids = {ch: i for i, ch in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> Tensor:
        """Token ids of ``text`` as a 1-d long tensor; an unknown character raises ``ValueError``."""
        try:
            return torch.tensor([self._ids[ch] for ch in text], dtype=torch.long)
        except KeyError as err:
            raise ValueError(f"character {err.args[0]!r} is not in the tokenizer's vocabulary: "
                             "build the tokenizer from a text that contains it") from None

    def decode(self, ids: Sequence[int] | Tensor) -> str:
        """Text of a sequence of token ids."""
        values = ids.tolist() if isinstance(ids, Tensor) else ids
        return "".join(self.chars[i] for i in values)


class WindowDataset(Dataset):
    """All windows of ``block_size + 1`` tokens: item ``i`` is ``x = tokens[i:i+T]``,
    ``y = tokens[i+1:i+T+1]`` and its own ``index`` ``i``.

    Example:
        >>> ds = WindowDataset(torch.arange(10), block_size=4)
        >>> len(ds), ds[2]["x"].tolist(), ds[2]["y"].tolist(), ds[2]["index"]
        (6, [2, 3, 4, 5], [3, 4, 5, 6], 2)
    """

    def __init__(self, tokens: Tensor, block_size: int) -> None:
        if tokens.dim() != 1 or len(tokens) <= block_size:
            raise ValueError(f"need a 1-d token tensor longer than block_size={block_size}, got shape "
                             f"{tuple(tokens.shape)}: generate a longer corpus or lower block_size")
        self.tokens = tokens
        self.block_size = block_size

    def __len__(self) -> int:
        return len(self.tokens) - self.block_size

    def __getitem__(self, index: int) -> dict[str, Tensor | int]:
        if not 0 <= index < len(self):
            raise IndexError(f"index {index} out of range for {len(self)} windows")
        chunk = self.tokens[index:index + self.block_size + 1]
        return {"x": chunk[:-1], "y": chunk[1:], "index": index}


@dataclass(frozen=True, kw_only=True, slots=True)
class BadBatches:
    """Which batches are corrupted, and how.

    Attributes:
        positions: 0-based batch positions in the loader's order (the step that consumes them).
        mode: one of :data:`CORRUPTION_MODES`. ``random`` by default: noise targets give the
            largest immediate loss (about ln(vocab) nats above a trained model's) and gradients
            that point away from the language.
        seed: seeds the corruption, per sample, so a corrupted sample is the same every time
            it is read.

    Example:
        >>> BadBatches.stretch(start=100, length=3).positions
        (100, 101, 102)
    """

    positions: tuple[int, ...]
    mode: str = "random"
    seed: int = 1234

    def __post_init__(self) -> None:
        if not isinstance(self.positions, tuple):
            raise ValueError(f"BadBatches.positions must be a tuple of ints, got {self.positions!r}: "
                             "pass e.g. positions=(100, 101)")
        if any(not isinstance(p, int) or p < 0 for p in self.positions):
            raise ValueError(f"BadBatches.positions must be non-negative ints, got {self.positions!r}")
        if len(set(self.positions)) != len(self.positions):
            raise ValueError(f"BadBatches.positions has duplicates: {self.positions!r}; list each once")
        if self.mode not in CORRUPTION_MODES:
            raise ValueError(f"BadBatches.mode {self.mode!r} is unknown: use one of {CORRUPTION_MODES}")

    @classmethod
    def stretch(cls, start: int, length: int, mode: str = "random", seed: int = 1234) -> "BadBatches":
        """``length`` consecutive bad batches from position ``start``."""
        if length < 1:
            raise ValueError(f"a bad stretch needs length >= 1, got {length!r}")
        return cls(positions=tuple(range(start, start + length)), mode=mode, seed=seed)


class SeededSampler(Sampler[int]):
    """A random permutation of ``range(num_samples)`` fixed by ``(seed, epoch)``.

    Iterating twice gives the same order until :meth:`set_epoch` (Lightning calls it at each
    epoch start) changes the epoch.

    Example:
        >>> list(SeededSampler(5, seed=0)) == list(SeededSampler(5, seed=0))
        True
    """

    def __init__(self, num_samples: int, seed: int = 0) -> None:
        self.num_samples = num_samples
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def order(self, epoch: int | None = None) -> list[int]:
        """The sample order of ``epoch`` (default: the current one)."""
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + (self.epoch if epoch is None else epoch))
        return torch.randperm(self.num_samples, generator=generator).tolist()

    def __iter__(self) -> Iterator[int]:
        return iter(self.order())

    def __len__(self) -> int:
        return self.num_samples


class CorruptedDataset(Dataset):
    """``base`` with the samples in ``bad_indices`` replaced by garbage (same shapes, same index).

    Example:
        >>> base = WindowDataset(torch.arange(20) % 5, block_size=4)
        >>> bad = CorruptedDataset(base, {3}, mode="constant", vocab_size=5)
        >>> bad[3]["x"].tolist(), bad[4]["x"].tolist()
        ([0, 0, 0, 0], [4, 0, 1, 2])
    """

    def __init__(self, base: WindowDataset, bad_indices: set[int] | frozenset[int], mode: str,
                 vocab_size: int, seed: int = 1234) -> None:
        if mode not in CORRUPTION_MODES:
            raise ValueError(f"corruption mode {mode!r} is unknown: use one of {CORRUPTION_MODES}")
        self.base = base
        self.bad_indices = frozenset(bad_indices)
        self.mode = mode
        self.vocab_size = vocab_size
        self.seed = seed

    def __len__(self) -> int:
        return len(self.base)

    def __getitem__(self, index: int) -> dict[str, Tensor | int]:
        item = self.base[index]
        if index not in self.bad_indices:
            return item
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        x, y = item["x"], item["y"]
        if self.mode == "random":
            x = torch.randint(self.vocab_size, x.shape, generator=generator)
            y = torch.randint(self.vocab_size, y.shape, generator=generator)
        elif self.mode == "constant":
            x = torch.zeros_like(x)
            y = torch.zeros_like(y)
        else:  # shuffle
            y = y[torch.randperm(len(y), generator=generator)]
        return {"x": x, "y": y, "index": index}


def bad_indices(sampler: SeededSampler, batch_size: int, positions: Sequence[int], epoch: int = 0) -> set[int]:
    """Dataset indices of the samples the loader puts in batch ``positions`` of ``epoch``.

    Example:
        >>> s = SeededSampler(8, seed=0)
        >>> bad_indices(s, 2, [1]) == set(s.order(0)[2:4])
        True
    """
    order = sampler.order(epoch)
    per_epoch = len(order) // batch_size
    for p in positions:
        if p >= per_epoch:
            raise ValueError(f"bad batch position {p} is past the {per_epoch} batches of an epoch: "
                             "use a longer corpus or an earlier position")
    return {i for p in positions for i in order[p * batch_size:(p + 1) * batch_size]}


def make_loader(dataset: WindowDataset, batch_size: int, seed: int = 0,
                bad: BadBatches | None = None, vocab_size: int | None = None) -> DataLoader:
    """A single-process DataLoader in seeded order, with ``bad`` batches corrupted.

    The last partial batch is dropped so that batch positions are exact. ``vocab_size`` is
    needed for ``random`` corruption.

    Example:
        >>> ds = WindowDataset(torch.arange(100) % 7, block_size=8)
        >>> loader = make_loader(ds, 4, seed=0, bad=BadBatches.stretch(2, 1), vocab_size=7)
        >>> sorted(next(iter(loader)))
        ['index', 'x', 'y']
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size!r}")
    sampler = SeededSampler(len(dataset), seed)
    data: Dataset = dataset
    if bad is not None and bad.positions:
        if vocab_size is None:
            raise ValueError("make_loader needs vocab_size to corrupt batches: pass the tokenizer's vocab_size")
        data = CorruptedDataset(dataset, bad_indices(sampler, batch_size, bad.positions), bad.mode,
                                vocab_size, bad.seed)
    return DataLoader(data, batch_size=batch_size, sampler=sampler, drop_last=True, num_workers=0)


@dataclass(frozen=True, kw_only=True, slots=True)
class DemoData:
    """The corpus, its tokenizer and the window dataset, built once and shared by runs.

    Example:
        >>> data = DemoData.build(block_size=16, num_chars=2_000)
        >>> data.tokenizer.vocab_size == len(set(data.text))
        True
    """

    text: str
    tokenizer: CharTokenizer
    dataset: WindowDataset

    @classmethod
    def build(cls, block_size: int = 64, num_chars: int = 300_000, seed: int = 0) -> "DemoData":
        text = generate_corpus(num_chars, seed)
        tokenizer = CharTokenizer(text)
        return cls(text=text, tokenizer=tokenizer, dataset=WindowDataset(tokenizer.encode(text), block_size))

    def loader(self, batch_size: int, seed: int = 0, bad: BadBatches | None = None) -> DataLoader:
        """A fresh loader over the windows (see :func:`make_loader`)."""
        return make_loader(self.dataset, batch_size, seed, bad, self.tokenizer.vocab_size)
