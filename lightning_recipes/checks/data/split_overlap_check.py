"""Check that the validation data does not repeat the training data (exact or near-duplicate samples)."""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Subset
from typing_extensions import Unpack, override

from lightning_recipes._stats import Z
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.data import _split_repeats as chance
from lightning_recipes.checks.data._relation import features
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.loaders import loader_length
from lightning_recipes.harness.walk import tensors_of

__all__ = ["SplitOverlapCheck"]

DENSE_RATE = 0.01  # training samples with a near duplicate within training: dense, only exact copies count
# exact copies of training in this share of validation warn even when training repeats itself as often
_EXACT_WARN_FRACTION = 0.5
_MAX_DIM = 1024  # longer float fingerprints are projected (seeded Gaussian) to this many dimensions
_CHUNK = 256  # rows of the similarity matrix computed at once


class SplitOverlapCheck(SanityCheck):
    """Look for validation samples that are also in the training data (exact, near or repeated samples).
    Cost: the batches read (shared), similarity matrices in chunks.

    Args:
        num_batches: Batches read from each loader.
        near_cosine: Cosine similarity of centred float inputs from which two samples are near duplicates.
        near_tokens: Fraction of equal positions from which two token sequences are near duplicates.
        warn_fraction: Estimated overlap (fraction of the validation set) from which the check warns.
        fail_fraction: Estimated overlap from which it fails.

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier
        >>> x, y = torch.randn(256, 16), torch.randint(0, 4, (256,))
        >>> train = DataLoader(TensorDataset(x, y), batch_size=32)
        >>> val = DataLoader(TensorDataset(x[:64] + 1e-3 * torch.randn(64, 16), y[:64]), batch_size=32)
        >>> result = SplitOverlapCheck().run(CheckContext(TinyClassifier(), train, val))
        >>> result.status, result.details["val_near"]
        ('fail', 64)
    """

    name = "split_overlap"

    def __init__(
        self,
        num_batches: int = 16,
        near_cosine: float = 0.99,
        near_tokens: float = 0.9,
        warn_fraction: float = 0.01,
        fail_fraction: float = 0.1,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_batches", num_batches, minimum=1)
        check_in_range("near_cosine", near_cosine, 0.0, 1.0, low_open=True)
        check_in_range("near_tokens", near_tokens, 0.0, 1.0, low_open=True)
        check_in_range("warn_fraction", warn_fraction, 0.0, 1.0, low_open=True)
        check_in_range("fail_fraction", fail_fraction, 0.0, 1.0, low_open=True)
        if warn_fraction > fail_fraction:
            got = f"{warn_fraction!r} > {fail_fraction!r}"
            raise ValueError(f"`warn_fraction` must be <= `fail_fraction`, got {got}.")
        self.num_batches, self.near_cosine, self.near_tokens = num_batches, near_cosine, near_tokens
        self.warn_fraction, self.fail_fraction = warn_fraction, fail_fraction

    @override
    def check(self, context: CheckContext) -> CheckResult:
        if context.val_dataloader is None:
            raise CheckSkipped("no validation loader: pass `val_dataloaders=` (or a datamodule with one)")
        if (shared := self._shared_dataset(context.train_dataloader, context.val_dataloader)) is not None:
            return shared
        train_batches, val_batches = context.train_batches(n := self.num_batches), context.val_batches(n)
        train = self._inputs(context, train_batches, "training")
        val = self._inputs(context, val_batches, "validation")
        train_keys, val_keys = _hashes(train), _hashes(val)
        train_blank, val_blank = _blank(train), _blank(val)

        counts = Counter(k for k, blank in zip(train_keys, train_blank, strict=True) if not blank)
        by_hash = {k: i for i, k in reversed(list(enumerate(train_keys))) if not train_blank[i]}  # the first
        train_duplicates = sum(c - 1 for c in counts.values())
        # val index -> train index
        exact = {v: by_hash[k] for v, k in enumerate(val_keys) if not val_blank[v] and k in by_hash}
        near, chance_matches, method = self._near(train, val, train_blank, val_blank)
        # exact repeats within training are chance too (a one-value sample has no cosine: a code, an encoding)
        chance_matches = max(chance_matches, sum(c for c in counts.values() if c > 1))
        near.update(exact)
        usable_train = sum(not b for b in train_blank)
        usable_val = sum(not b for b in val_blank)
        if usable_val == 0 or usable_train < 2:
            raise CheckSkipped("every sample read is blank (constant); see the `data` check.")
        chance_rate = chance_matches / usable_train
        continuous = bool(train) and torch.is_floating_point(train[0])  # token sequences repeat naturally
        dense = continuous and chance_rate >= DENSE_RATE
        if dense:  # neighbours sit within the near threshold (windows of one series): only copies count
            near = dict(exact)  # against the same chance rate: no verdict gets stronger on dense data
            method = f"exact only: {chance_matches} training samples are near another"
        coverage, total = _coverage(context.train_dataloader, len(train))
        excess = _excess(len(near), chance_rate, usable_val, usable_train)
        estimate = min(1.0, excess / usable_val / coverage)
        # whole rows, every entry (the target too): ids repeat by chance, (user, item, rating) rows do not
        row_keys = [k for k, b in zip(_row_hashes(context, train_batches), train_blank, strict=True) if not b]
        val_rows = [k for k, b in zip(_row_hashes(context, val_batches), val_blank, strict=True) if not b]
        row_counts = Counter(row_keys)
        rows_copied = sum(k in row_counts for k in val_rows)
        row_chance = sum(c for c in row_counts.values() if c > 1) / max(1, len(row_keys))
        row_excess = _excess(rows_copied, row_chance, len(val_rows), len(row_keys))
        if row_excess and row_excess / len(val_rows) / coverage > estimate:
            excess, estimate = row_excess, min(1.0, row_excess / len(val_rows) / coverage)
        repeats = chance.repeats_of(train, val, train_blank, val_blank)
        repeat_estimate = 0.0
        if repeats is not None:
            searched, _ = _coverage(context.train_dataloader, min(len(train), chance.MAX_KEYS))
            repeat_estimate = min(1.0, repeats.excess_fraction / searched)
        details: dict[str, Any] = {
            "train_samples": len(train),
            "val_samples": len(val),
            "train_dataset_size": total,
            "val_exact": len(exact),
            "val_near": len(near),
            "val_rows_copied": rows_copied,
            "train_duplicates": train_duplicates,
            "chance_rate": chance_rate,
            "estimated_overlap": estimate,
            "near_method": method,
            "examples": [{"val_index": v, "train_index": t} for v, t in sorted(near.items())[:5]],
            "measured": max(estimate, repeat_estimate),
        }
        if repeats is not None:
            details["repeats"] = {**repeats.details(), "estimated_overlap": repeat_estimate}
        near_text_only = not continuous and not exact  # text repeats itself across splits: warn at most
        level = chance.repeat_level(repeats, repeat_estimate, self.fail_fraction)
        found = (
            f"{len(near)} of {usable_val} validation samples repeat a training sample ({len(exact)} exact; "
            f"{chance_rate:.1%} by chance), ~{max(estimate, repeat_estimate):.0%} of validation"
        )
        if excess == row_excess > 0:
            found = f"{rows_copied} of {len(val_rows)} validation rows repeat a training row entry for entry "
            found += f"(target too; {row_chance:.1%} by chance), ~{estimate:.0%} of validation"
        if repeats is not None and repeat_estimate > estimate:  # the repeat test decides: say what it saw
            found = f"{repeats.flagged} of {repeats.queries} validation samples sit nearer training than "
            found += f"chance allows ({repeats.expected:.1f} expected, p = {repeats.chance_p:.0e}): "
            found += f"~{repeat_estimate:.0%} repeats"
        split = "Split once by index (or by subject: GroupShuffleSplit) before any augmentation; deduplicate."
        if (estimate >= self.fail_fraction and excess >= 3 and not near_text_only) or level == "fail":
            return self.verdict("fail", found, details, action=split)
        if (estimate >= self.warn_fraction and excess >= 2) or level == "warn":
            return self.verdict("warn", found, details, action=split)
        alike = [t for t in train if t.shape == train[0].shape] if continuous else []
        copies_count = len(exact) >= max(3, _EXACT_WARN_FRACTION * usable_val) and train[0].numel() > 1
        if copies_count and alike and not chance.drawn_from_a_small_space(torch.stack(alike)):
            copies = f"{len(exact)} of {usable_val} validation samples are exact copies of training samples "
            copies += f"({train_duplicates} repeats within training)"
            dedup = "Deduplicate (hash the samples) and split before oversampling."
            return self.verdict("warn", copies, details, action=dedup)
        if level == "inconclusive" and repeats is not None:
            if repeats.own and repeats.within_training:
                summary = f"validation repeats training ({repeats.own[0]:.0%} flagged) no more than training "
                summary += f"repeats itself ({repeats.own[1]:.0%}): chance, or a few shared subjects"
                action = "If samples come from subjects (patients, customers), split by subject."
            else:
                summary = f"the repeat test is undecided: {repeats.flagged} of {repeats.queries} flagged, "
                summary += f"too few samples (chance p = {repeats.chance_p:.1e})"
                action = "Read more batches (`num_batches=`) or look at the pairs in details['repeats']."
            return self.verdict("inconclusive", summary, details, action=action)
        passed = f"no overlap beyond chance: {len(near)} of {usable_val} validation samples match training, "
        return self.verdict("pass", passed + f"{chance_rate:.1%} by chance", details)

    def _inputs(self, context: CheckContext, batches: list[Any], split: str) -> list[Tensor]:
        samples: list[Tensor] = []
        for batch in batches:
            inputs, _ = context.split(batch)
            if inputs is None or inputs.ndim == 0:
                raise CheckSkipped(f"cannot find the input tensor in a {split} batch; pass `input_key`.")
            samples.extend(inputs.detach())
        if not samples:
            raise CheckSkipped(f"the {split} loader yielded no batch.")
        return samples

    def _near(
        self, train: list[Tensor], val: list[Tensor], train_blank: list[bool], val_blank: list[bool]
    ) -> tuple[dict[int, int], int, str]:
        """Near-duplicate matches ``{val index: train index}`` and the leave-one-out count within train."""
        matches: dict[int, int] = {}
        chance = 0
        methods = set()
        groups: defaultdict[Any, tuple[list[int], list[int]]] = defaultdict(lambda: ([], []))  # train, val
        for side, (samples, blank) in enumerate(((train, train_blank), (val, val_blank))):
            for index, sample in enumerate(samples):
                if not blank[index]:
                    groups[(tuple(sample.shape), torch.is_floating_point(sample))][side].append(index)
        for (_, floating), (train_ids, val_ids) in groups.items():
            if len(train_ids) < 1:
                continue
            rows: Any = _fingerprint if floating else lambda s: s.reshape(len(s), -1)
            similar: Any = (lambda a, b: a @ b.T) if floating else _token_similarity
            threshold = self.near_cosine if floating else self.near_tokens
            methods.add(f"cosine >= {threshold:g}" if floating else f"{threshold:.0%} equal tokens")
            t_f = rows(torch.stack([train[i] for i in train_ids]))
            if val_ids:
                v_f = rows(torch.stack([val[i] for i in val_ids]))
                best, where = _best_match(v_f, t_f, similar, exclude_self=False)
                for row in torch.nonzero(best >= threshold).flatten().tolist():  # sync: once per group
                    matches[val_ids[row]] = train_ids[int(where[row])]
            if len(train_ids) >= 2:
                best, _ = _best_match(t_f, t_f, similar, exclude_self=True)
                chance += int((best >= threshold).sum())  # sync: once per group
        return matches, chance, " / ".join(sorted(methods)) or "none"

    def _shared_dataset(self, train: Any, val: Any) -> CheckResult | None:
        """Validation over the training dataset itself, or an overlapping ``Subset`` of the same one."""
        if not isinstance(train, DataLoader) or not isinstance(val, DataLoader):
            return None
        t, v = train.dataset, val.dataset
        if t is v:
            summary = f"the validation loader reads the training dataset itself ({type(t).__name__})"
            details: dict[str, Any] = {"estimated_overlap": 1.0, "measured": 1.0, "shared_dataset": True}
            return self.verdict("fail", summary, details, action="Split the data once (random_split).")
        if not (isinstance(t, Subset) and isinstance(v, Subset) and t.dataset is v.dataset):
            return None
        if not (shared := set(map(int, t.indices)) & set(map(int, v.indices))):
            return None
        fraction = len(shared) / max(1, len(v.indices))
        summary = f"Subsets of one dataset share {len(shared)} indices ({fraction:.1%} of validation)"
        details = {"estimated_overlap": fraction, "measured": fraction, "shared_indices": sorted(shared)[:5]}
        status: Literal["fail", "warn"] = "fail" if fraction >= self.fail_fraction else "warn"
        return self.verdict(status, summary, details, action="Draw both splits from one random_split.")


def _excess(matches: int, chance_rate: float, queries: int, searched: int) -> float:
    """Matches beyond chance, or 0 within ``Z`` binomial standard errors (the chance rate's error too)."""
    excess = max(0.0, matches - chance_rate * queries)
    noise = (chance_rate * (1 - chance_rate) * queries * (1 + queries / max(1, searched))) ** 0.5
    return excess if excess > Z * noise else 0.0


def _row_hashes(context: CheckContext, batches: list[Any]) -> list[bytes]:
    """One key per sample over every per-sample tensor of its batch (inputs, targets, metadata)."""
    keys: list[bytes] = []
    for batch in batches:
        size = len(context.split(batch)[0])  # type: ignore[arg-type]
        parts = [_hashes(list(t)) for t in tensors_of(batch) if t.ndim and len(t) == size]
        keys += [b"".join(sample) for sample in zip(*parts, strict=True)]
    return keys


def _coverage(loader: Any, read: int) -> tuple[float, int | None]:
    """Fraction of the training set read, when the loader's dataset has a length."""
    total = loader_length(getattr(loader, "dataset", None)) or 0
    return (1.0, None) if total <= 0 else (min(1.0, read / total), total)


def _hashes(samples: list[Tensor]) -> list[bytes]:
    keys = []
    host = [s.cpu().contiguous() for s in samples]  # sync: one device-to-host copy of the inputs
    for sample in host:
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{tuple(sample.shape)}{sample.dtype}".encode())
        digest.update(sample.flatten().view(torch.uint8).numpy().tobytes())
        keys.append(digest.digest())
    return keys


def _blank(samples: list[Tensor]) -> list[bool]:
    """Samples whose values are all equal (a one-value sample is never blank: it has nothing to vary)."""
    if not samples:
        return []
    return torch.stack([(s.flatten() == s.flatten()[:1]).all() & (s.numel() != 1) for s in samples]).tolist()


def _fingerprint(x: Tensor) -> Tensor:
    """Centred, unit-norm float features per sample; large images pooled, long vectors projected."""
    x = features(x)
    if x.shape[1] > _MAX_DIM:
        generator = torch.Generator().manual_seed(0)  # fixed: the same projection for both splits
        x = x @ torch.randn(x.shape[1], _MAX_DIM, generator=generator).to(x.device)
    x = x - x.mean(dim=1, keepdim=True)
    return x / x.norm(dim=1, keepdim=True).clamp_min(1e-12)


def _token_similarity(a: Tensor, b: Tensor) -> Tensor:
    return (a[:, None, :] == b[None, :, :]).float().mean(dim=-1)


def _best_match(queries: Tensor, keys: Tensor, similar: Any, *, exclude_self: bool) -> tuple[Tensor, Tensor]:
    """Per query row, the highest similarity to any key row (not itself if asked) and its index."""
    best, where = [], []
    chunk = _CHUNK if similar is not _token_similarity else max(1, 2**22 // max(1, keys.numel()))
    for start in range(0, len(queries), chunk):
        block = similar(queries[start : start + chunk], keys).float()
        if exclude_self:
            rows = torch.arange(block.shape[0], device=block.device)
            block[rows, rows + start] = -float("inf")
        value, index = block.max(dim=1)
        best.append(value)
        where.append(index)
    return torch.cat(best), torch.cat(where)
