"""Sealed gallery ZW (issue #34, half ``zw2``): board-position evaluation on synthetic chess-like 8 x 8 boards
(material balance from piece planes; colour-flip symmetry), chord recognition from 12-bin chroma vectors
(transposition augmentation that must rotate the label too), learned continuous-time dynamics on irregularly
sampled trajectories (a vector field integrated over the given gaps; rollouts), multi-view fusion of two
sensors of the same object (either view missing at random, a presence mask) and shortest-path length on
small grid mazes (a CNN reading the maze, start and goal planes). Written blind (see the package docstring);
each bug is proved against its healthy twin in ``test_proofs_zw2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zw2_data as d
from galleries.preflight.sealed import _zw2_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def board_data(augment=d.flip_colours) -> dict[str, Any]:
    """2,000 training positions (colour-flipped per read by ``augment``) and 400 validation positions."""
    train = d.Rows(*d.boards(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.boards(400, 2)), batch_size=64)


def chord_data(augment=d.transpose) -> dict[str, Any]:
    """1,200 training chroma vectors (transposed per read by ``augment``) and 400 validation vectors."""
    train = d.Rows(*d.chroma(1200, 1), transform=augment)
    return {**d.loaders(train, d.Rows(*d.chroma(400, 2)), batch_size=64), "num_classes": d.CHORDS}


def dynamics_data(gap_before: bool = False) -> dict[str, Any]:
    """The consecutive samples of 150 training and 40 validation trajectories as (state, gap, next state),
    both built by the same pipeline (``gap_before``: see :func:`_zw2_data.transitions`)."""
    train = d.Rows(*d.transitions(150, 1, gap_before))
    return d.loaders(train, d.Rows(*d.transitions(40, 2, gap_before)), batch_size=64)


def rollout_data() -> dict[str, Any]:
    """Windows of four consecutive samples of 150 training and 40 validation trajectories."""
    return d.loaders(d.Rows(*d.windows(150, 1)), d.Rows(*d.windows(40, 2)), batch_size=64)


def fusion_data(sorted_b: bool = False, augment=None) -> dict[str, Any]:
    """2,000 training objects (augmented per read by ``augment``) and 400 validation objects, both read by
    the same pipeline (``sorted_b``: see :func:`_zw2_data.views`)."""
    train = d.Rows(*d.views(2000, 1, sorted_b), transform=augment)
    val = d.Rows(*d.views(400, 2, sorted_b))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.OBJECTS}


def maze_data(diagonal: bool = False, augment=None) -> dict[str, Any]:
    """3,000 training mazes (augmented per read by ``augment``) and 500 validation mazes, their path lengths
    searched by the same code (``diagonal``: see :func:`_zw2_data.mazes`)."""
    train = d.Rows(*d.mazes(3000, 1, diagonal), transform=augment)
    return d.loaders(train, d.Rows(*d.mazes(500, 2, diagonal)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TARGET = "the target encodes the quantity the task asks for"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
RANGE = "the model can express every value the target takes"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
SERVED = "the served output of a row does not depend on the other rows served with it"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "board_colour_flip_reverses_planes",
        "board evaluation from piece planes (colour-flip augmentation)",
        m.BoardNet,
        partial(board_data, d.flip_colours_reversed),
        "The colour flip exchanges the colours with planes.flip(0), which reverses all 12 planes: the piece "
        "types are reversed too (pawn <-> king, knight <-> queen, bishop <-> rook), and half the training "
        "positions are labelled with the wrong pieces' values.",
        PAIRED,
    ),
    SealedCase(
        "board_value_head_tanh",
        "board evaluation from piece planes (value head)",
        m.BoardNetTanhHead,
        board_data,
        "The value head ends in tanh, copied from an AlphaZero value head that predicts a result in [-1, 1], "
        "while the targets are evaluations in pawns: every position a pawn or more ahead is served as ~1.",
        RANGE,
    ),
    SealedCase(
        "board_plateau_mode_max",
        "board evaluation from piece planes (learning-rate schedule)",
        m.BoardNetPlateauMax,
        board_data,
        "ReduceLROnPlateau was built with mode='max' (copied from a set-up that monitored an accuracy) on "
        "the training loss: every epoch in which the loss falls counts as no improvement and cuts the "
        "learning rate tenfold, and training stalls after two epochs.",
        SCHEDULE,
    ),
    SealedCase(
        "chord_transpose_keeps_label",
        "chord recognition from chroma (transposition augmentation)",
        m.ChordNet,
        partial(chord_data, d.transpose_chroma_only),
        "The transposition augmentation rotates the chroma vector but leaves the chord label as it was: the "
        "root no longer matches the notes, and the model learns only major against minor.",
        PAIRED,
    ),
    SealedCase(
        "chord_transpose_label_mod_24",
        "chord recognition from chroma (transposition augmentation)",
        m.ChordNet,
        partial(chord_data, d.transpose_mod_24),
        "The transposed label is computed as (label + k) % 24 rather than rotating the root within its "
        "quality: a root pushed past B wraps into the other quality's block, so most transposed chords with "
        "a low root are labelled with the wrong quality.",
        PAIRED,
    ),
    SealedCase(
        "dynamics_gap_before_sample",
        "learned continuous-time dynamics on irregularly sampled trajectories (gaps)",
        m.ODENet,
        partial(dynamics_data, True),
        "Each state is paired with the time since the previous sample (torch.diff with prepend, the GRU-D "
        "convention) instead of the gap to the next one it is trained to reach: the integrator is given an "
        "unrelated gap, and the learned field is the average move.",
        PAIRED,
    ),
    SealedCase(
        "dynamics_integrates_mean_gap",
        "learned continuous-time dynamics on irregularly sampled trajectories (integrator)",
        m.ODENetMeanGap,
        dynamics_data,
        "The integrator steps every row by the batch's mean gap (dt.mean(), written to get past a "
        "broadcasting error), never by the row's own gap: the field learns the average quarter-second move "
        "and served rollouts drift.",
        DEPENDS,
    ),
    SealedCase(
        "dynamics_residual_scored_against_state",
        "learned continuous-time dynamics on irregularly sampled trajectories (residual loss)",
        m.ODENetResidualAgainstState,
        dynamics_data,
        "The residual loss scores the predicted change (next - x) against the next state itself instead of "
        "the change: the field learns to jump by a whole state each step, and served rollouts run away.",
        TASK_LOSS,
    ),
    SealedCase(
        "fusion_view_b_sorted_by_kind",
        "multi-view fusion of two sensors (pairing the views)",
        m.FusionNet,
        partial(fusion_data, True),
        "View B's rows are read from a table sorted by object kind while view A's are in capture order: the "
        "two views of a row belong to different objects, view B is learned as noise, and every object seen "
        "by view B alone is guessed.",
        PAIRED,
    ),
    SealedCase(
        "fusion_mean_over_batch_count",
        "multi-view fusion of two sensors (masked mean of the views)",
        m.FusionNetBatchCount,
        fusion_data,
        "The masked mean divides by mask.sum() with no dim, the count of present views in the whole batch: "
        "the head learns embeddings scaled for batches of 64 rows, and served on any other number of rows "
        "they have another scale.",
        SERVED,
    ),
    SealedCase(
        "fusion_mask_columns_swapped",
        "multi-view fusion of two sensors (reading the presence mask)",
        m.FusionNetMaskColumnsSwapped,
        fusion_data,
        "The model reads the mask's columns as (view B, view A), the order of the sensor log it was first "
        "written for, while the dataset writes (view A, view B): an object seen by one sensor alone has its "
        "view masked out and the zero-filled missing one read instead.",
        DEPENDS,
    ),
    SealedCase(
        "maze_search_takes_diagonals",
        "shortest-path length on grid mazes (targets)",
        m.MazeNet,
        partial(maze_data, True),
        "The breadth-first search that makes the targets was given 8 neighbours (diagonal moves) instead of "
        "4: every target is the length of a path the task does not allow, and served lengths are too short.",
        TARGET,
    ),
    SealedCase(
        "maze_loss_broadcasts",
        "shortest-path length on grid mazes (loss)",
        m.MazeNetBroadcastLoss,
        maze_data,
        "The loss subtracts the (B,) lengths from the head's (B, 1) output: broadcasting scores every "
        "prediction against every length in the batch, and the net learns the batch mean.",
        TASK_LOSS,
    ),
    SealedCase(
        "maze_warmup_stepped_per_epoch",
        "shortest-path length on grid mazes (learning-rate warm-up)",
        m.MazeNetWarmupPerEpoch,
        maze_data,
        "The 100-step warm-up scheduler is returned bare ([optimizer], [scheduler]), so Lightning steps it "
        "once per epoch: the learning rate never gets past a few percent of its target.",
        SCHEDULE,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "board_colour_flip_negates",
            "board evaluation (colour-flip augmentation: the targets change sign on half the reads)",
            m.BoardNet,
            board_data,
        ),
        (
            "board_antisymmetric_net",
            "board evaluation (an antisymmetric net: g(position) - g(colour-flipped position))",
            m.BoardNetAntisymmetric,
            partial(board_data, None),
        ),
        (
            "chord_transposed_with_label",
            "chord recognition (every read transposed by a random interval, the root rotated with it)",
            m.ChordNet,
            chord_data,
        ),
        (
            "chord_circular_correlation",
            "chord recognition (a circular correlation over the octave: equivariant logits flattened "
            "quality-major)",
            m.ChordCircular,
            partial(chord_data, None),
        ),
        (
            "dynamics_rollout_loss",
            "learned dynamics (trained on its own three-step rollouts over irregular gaps)",
            m.ODENetRollout,
            rollout_data,
        ),
        (
            "fusion_modality_dropout",
            "multi-view fusion (a present view hidden at random in training, its mask bit cleared)",
            m.FusionNet,
            partial(fusion_data, augment=d.drop_a_view),
        ),
        (
            "maze_turned_and_mirrored",
            "shortest-path length (every read turned and mirrored, the three planes together)",
            m.MazeNet,
            partial(maze_data, augment=d.turn_maze),
        ),
        (
            "maze_poisson_count",
            "shortest-path length (a Poisson log-likelihood on the length as a count, served as exp)",
            m.MazeNetPoisson,
            maze_data,
        ),
    )
]
