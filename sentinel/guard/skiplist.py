"""The batches the guard skipped, kept so that a resumed run skips them again."""

from __future__ import annotations

from typing import Any

from sentinel.guard.batch_id import fingerprint, sample_indices


class SkipList:
    """Entries ``{"step", "epoch", "batch_idx", "indices" | "fingerprint", "rollback"}``.

    A batch matches an entry when it carries exactly the same sample indices (order ignored) or,
    for batches without indices, the same content fingerprint. A whole batch comes back only when
    the data order repeats (an unshuffled loader, a seeded sampler replayed on resume), and then at
    the same position in its epoch: :meth:`listed_at` says whether a position can hold a listed
    batch without looking at the batch, so a run whose skip list is not empty pays no host sync
    (indices or fingerprint) nor collective on the other steps.

    Example:
        >>> import torch
        >>> skips = SkipList()
        >>> skips.add({"step": 3, "indices": [4, 1]})
        >>> skips.matches({"x": torch.zeros(2), "index": torch.tensor([1, 4])})
        True
    """

    def __init__(self, entries: list[dict[str, Any]] | None = None) -> None:
        self.entries: list[dict[str, Any]] = []
        self._index_sets: set[frozenset[int]] = set()
        self._fingerprints: set[str] = set()
        self._positions: set[int] = set()
        self._anywhere = False  # an entry without a batch_idx (older lists): look at every batch
        for entry in entries or []:
            self.add(entry)

    def add(self, entry: dict[str, Any]) -> None:
        if "indices" in entry:
            self._index_sets.add(frozenset(int(i) for i in entry["indices"]))
        elif "fingerprint" in entry:
            self._fingerprints.add(str(entry["fingerprint"]))
        else:
            raise ValueError(f"skip entry {entry!r} has neither 'indices' nor 'fingerprint'")
        if isinstance(entry.get("batch_idx"), int):
            self._positions.add(entry["batch_idx"])
        else:
            self._anywhere = True
        self.entries.append(dict(entry))

    def discard_outliers(self, steps: set[int]) -> bool:
        """Drop the entries of withheld outlier updates at these steps (a streak that proved not
        to be bad batches); True when any was dropped.

        Example:
            >>> skips = SkipList([{"step": 3, "reason": "outlier", "indices": [4]}])
            >>> skips.discard_outliers({3}), len(skips)
            (True, 0)
        """
        keep = [e for e in self.entries if not (e.get("reason") == "outlier" and e.get("step") in steps)]
        if len(keep) == len(self.entries):
            return False
        self.__init__(keep)
        return True

    def __len__(self) -> int:
        return len(self.entries)

    def listed_at(self, batch_idx: int) -> bool:
        """Whether a batch at this position of its epoch may be listed (decided without the batch).

        Example:
            >>> SkipList([{"batch_idx": 3, "indices": [7]}]).listed_at(4)
            False
        """
        return self._anywhere or batch_idx in self._positions

    def matches(self, batch: Any) -> bool:
        """True when ``batch`` is one of the skipped batches (cheap when the list is empty)."""
        if not self.entries:
            return False
        indices = sample_indices(batch)
        if indices is not None:
            return frozenset(indices) in self._index_sets
        return bool(self._fingerprints) and fingerprint(batch) in self._fingerprints
