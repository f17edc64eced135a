"""Sealed gallery V's data (half ``w``): small seeded synthetic sets (seismic traces with a P-wave onset,
hospital stays with their length, molecular fingerprints with enumerated copies, flow-cytometry samples of
patients' cells, quality-scored distortions of scikit-learn's digits, point mutations of proteins with their
stability change). Every builder is deterministic (its own generator); random augmentation at read time
draws from the global RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, gen, loaders

__all__ = ["Rows", "digits", "gen", "loaders"]


# --- seismic phase picking: the P-wave onset in a trace -----------------------------------------------------
RAW, TRACE, DECIMATE = 512, 256, 2  # recorded at 100 Hz, served at 50 Hz
ALIGNED_ONSET = 30  # a catalogue window's fixed lead before its pick (at 50 Hz)


def traces(n: int, seed: int, aligned: bool = False, raw_onset: bool = False) -> tuple[torch.Tensor, ...]:
    """``n`` vertical-component traces recorded at 100 Hz (512 samples), decimated to 50 Hz (256 samples,
    the mean of each pair) and scaled by their peak: background noise, then from the onset a decaying
    oscillation of random frequency, amplitude and polarity; and the onset's sample index at 50 Hz (its
    index at 100 Hz with ``raw_onset``). The onset lies anywhere in 20..124 at 50 Hz (at a fixed 30 with
    ``aligned``: windows cut around a catalogue pick)."""
    g = gen(seed)
    if aligned:
        onset = torch.full((n, 1), DECIMATE * ALIGNED_ONSET)
    else:
        onset = torch.randint(40, 250, (n, 1), generator=g)
    t = torch.arange(RAW)[None].float()
    after = (t - onset).clamp(min=0)
    freq = 4 + 8 * torch.rand(n, 1, generator=g)  # Hz
    decay = 40 + 80 * torch.rand(n, 1, generator=g)  # samples
    amp = (0.5 + 1.5 * torch.rand(n, 1, generator=g)) * torch.sign(torch.randn(n, 1, generator=g))
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    event = (
        amp
        * (1 - torch.exp(-after / 4))
        * torch.exp(-after / decay)
        * torch.sin(2 * math.pi * freq * after / 100 + phase)
    )
    wave = event * (t >= onset) + 0.15 * torch.randn(n, RAW, generator=g)
    wave = wave.view(n, TRACE, DECIMATE).mean(-1)
    wave = wave / wave.abs().amax(1, keepdim=True)
    label = onset[:, 0] if raw_onset else onset[:, 0] // DECIMATE
    return wave, label


def flip_polarity(wave: torch.Tensor, onset: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the onset: a random sign flip of the trace (first motions go either way)."""
    return (-wave if torch.rand(()) < 0.5 else wave), onset


# --- hospital length of stay, predicted at admission --------------------------------------------------------
VITALS, WARDS, STAY_COLUMNS = 4, 8, 6
EXTRACT_CODES = torch.tensor([3, 0, 6, 1, 7, 2, 5, 4])  # the extract's codes, in order of first appearance


def stays(
    n: int, seed: int, whole_stay_labs: bool = False, extract_codes: bool = False
) -> tuple[torch.Tensor, ...]:
    """``n`` admissions: four standardised vitals at admission, age (scaled), the number of lab tests (first
    24 hours, or over the whole stay with ``whole_stay_labs``, which rises with the stay's length), and the
    hospital's ward id (8 wards; wards 4..7 do not change the stay; with ``extract_codes``, the codes the
    extract's factorisation gave the wards instead); the log of the length of stay in days."""
    g = gen(seed)
    vitals = torch.randn(n, VITALS, generator=g)
    age = torch.rand(n, 1, generator=g) * 2 - 1
    ward = torch.randint(WARDS, (n,), generator=g)
    ward_effect = torch.tensor([0.6, -0.4, 0.3, -0.5, 0.0, 0.0, 0.0, 0.0])[ward]
    log_stay = (
        1.0
        + 0.5 * vitals[:, 0]
        - 0.3 * vitals[:, 1]
        + 0.4 * torch.tanh(vitals[:, 2] * vitals[:, 3])
        + 0.3 * age[:, 0]
        + ward_effect
        + 0.35 * torch.randn(n, generator=g)
    )
    if whole_stay_labs:
        rate = 2.0 * log_stay.exp()
    else:
        rate = 3.0 + 1.5 * vitals[:, 0].clamp(min=0)
    labs = torch.poisson(rate, generator=g)
    table = torch.cat([vitals, age, (labs[:, None] / 10)], 1)
    return table, (EXTRACT_CODES[ward] if extract_codes else ward), log_stay


# --- aqueous solubility from molecular fingerprints (enumerated copies) -------------------------------------
BITS, COPIES, TRAIN_MOLECULES = 96, 5, 800
_BIT_WEIGHTS = torch.randn(BITS, generator=gen(71)) * 0.4


def molecules(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` molecules: a 96-bit fingerprint (each bit set with probability 0.15) and its log solubility (a
    sum of fragment contributions, a saturating size term and an assay noise the fingerprint does not
    explain)."""
    g = gen(seed)
    bits = (torch.rand(n, BITS, generator=g) < 0.15).float()
    size = bits.sum(1)
    log_s = bits @ _BIT_WEIGHTS - 2 * torch.tanh(size / 15) + 0.5 * torch.randn(n, generator=g)
    return bits, log_s


def enumerated(bits: torch.Tensor, log_s: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each molecule's 5 enumerated forms (tautomers and protonation states, as a toolkit lists them), in
    molecule order: its fingerprint with two bits changed at random, with the molecule's measured
    solubility."""
    g = gen(seed)
    copies = bits.repeat_interleave(COPIES, 0)
    flip = torch.zeros_like(copies)
    flip.scatter_(1, torch.randint(BITS, (len(copies), 2), generator=g), 1.0)
    return (copies + flip) % 2, log_s.repeat_interleave(COPIES)


# --- flow cytometry: the share of abnormal cells in a patient's sample --------------------------------------
MARKERS, MAX_CELLS = 4, 120
_NORMAL = torch.tensor([[1.0, 2.0, 1.5, 0.5], [2.0, 0.5, 2.5, 1.5]])
_BLAST = torch.tensor([2.5, 1.0, 0.5, 2.5])


def samples(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """``n`` patients' samples of 20..120 cells with 4 marker intensities, zero-padded to 120 cells, the
    number of cells, and the share of blasts (uniform in 0..0.6; normal cells come from two populations)."""
    g = gen(seed)
    count = torch.randint(20, MAX_CELLS + 1, (n,), generator=g)
    share = 0.6 * torch.rand(n, generator=g)
    blast = torch.rand(n, MAX_CELLS, generator=g) < share[:, None]
    population = _NORMAL[torch.randint(2, (n, MAX_CELLS), generator=g)]
    cells = torch.where(blast[..., None], _BLAST, population) + 0.5 * torch.randn(
        n, MAX_CELLS, MARKERS, generator=g
    )
    real = torch.arange(MAX_CELLS) < count[:, None]
    cells = cells * real[..., None]
    truth = (blast & real).sum(1) / count
    return cells, count, truth


def subsample_cells(
    cells: torch.Tensor, count: torch.Tensor, share: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Augmentation: a random 60..100% of the patient's cells, moved to the front and zero-padded again (the
    share it keeps is the sample's own, up to sampling)."""
    keep = max(1, int(int(count) * (0.6 + 0.4 * float(torch.rand(())))))
    chosen = torch.randperm(int(count))[:keep]
    out = torch.zeros_like(cells)
    out[:keep] = cells[chosen]
    return out, torch.tensor(keep), share


# --- image quality assessment: a mean opinion score for distorted digits ------------------------------------
def distorted(part: str, seed: int, copies: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Digits of ``part`` (8 x 8), ``copies`` times over, each blurred (a 3 x 3 box blur mixed in by 0..1)
    and noised (Gaussian, sigma 0..0.4), with the raters' mean opinion score (1..5, falling with both, rater
    noise 0.1)."""
    g = gen(seed)
    x = digits(part, (1, 8, 8))[0].repeat(copies, 1, 1, 1)
    n = len(x)
    blur = torch.rand(n, 1, 1, 1, generator=g)
    sigma = 0.4 * torch.rand(n, 1, 1, 1, generator=g)
    box = F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)
    image = (1 - blur) * x + blur * box + sigma * torch.randn(x.shape, generator=g)
    score = 5 - 1.5 * blur.flatten() - 6 * sigma.flatten() + 0.1 * torch.randn(n, generator=g)
    return image, score


def flips_and_turns(image: torch.Tensor, score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the quality: a random flip and quarter turn of the image."""
    if torch.rand(()) < 0.5:
        image = image.flip(-1)
    return image.rot90(int(torch.randint(4, ())), (-2, -1)), score


def noise_too(image: torch.Tensor, score: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The classifier template's augmentation: flips and turns, then Gaussian noise (sigma 0.25) on the
    image, with the score kept."""
    image, score = flips_and_turns(image, score)
    return image + 0.25 * torch.randn_like(image), score


# --- protein stability: the change in folding free energy of a point mutation -------------------------------
RESIDUES, ENV = 20, 8
_PROPERTIES = torch.randn(RESIDUES, 4, generator=gen(73))
_ENV_MIX = torch.randn(ENV, 4, generator=gen(74))


def mutations(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` point mutations: one-hot wild-type residue (20), one-hot mutant residue (20) and 8 features of
    the site's structural environment; the stability change ddG (antisymmetric: the reverse mutation has
    the opposite sign), with a little measurement noise."""
    g = gen(seed)
    wild = torch.randint(RESIDUES, (n,), generator=g)
    mutant = (wild + torch.randint(1, RESIDUES, (n,), generator=g)) % RESIDUES
    env = torch.randn(n, ENV, generator=g)
    ddg = (torch.tanh(env @ _ENV_MIX) * (_PROPERTIES[mutant] - _PROPERTIES[wild])).sum(1)
    ddg = ddg + 0.1 * torch.randn(n, generator=g)
    x = torch.cat([F.one_hot(wild, RESIDUES).float(), F.one_hot(mutant, RESIDUES).float(), env], 1)
    return x, ddg


def swap(x: torch.Tensor) -> torch.Tensor:
    """The reverse mutation's row: wild type and mutant exchanged."""
    return torch.cat([x[..., RESIDUES : 2 * RESIDUES], x[..., :RESIDUES], x[..., 2 * RESIDUES :]], -1)


def reverse_mutations(x: torch.Tensor, ddg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: half the time, the reverse mutation with the opposite stability change."""
    if torch.rand(()) < 0.5:
        return swap(x), -ddg
    return x, ddg


def reverse_mutations_sign_kept(x: torch.Tensor, ddg: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: half the time the reverse mutation, with the same stability change."""
    if torch.rand(()) < 0.5:
        return swap(x), ddg
    return x, ddg
