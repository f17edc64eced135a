"""Sealed gallery ZZ1 (issue #34, half ``zz1``): learning to rank with query groups (ListNet and a
hand-written LambdaRank; NDCG), node classification with a dense two-layer GCN on stochastic-block-model
graphs with half the nodes labelled, anomaly detection by an autoencoder trained on healthy sensor readings
(AUROC), 2x super-resolution of sharp shapes (pixel shuffle; random crops) and single-object localisation
(class and box) on a noisy canvas. Written blind (see the package docstring); each bug is proved against its
healthy twin in ``test_proofs_zz1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zz1_data as d
from galleries.preflight.sealed import _zz1_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def ranking_data(transform=None, drop_unjudged: bool = False) -> dict[str, Any]:
    """600 training queries (read through ``transform``) and 150 validation queries of 6..12 documents
    padded to 12 (with ``drop_unjudged``, training queries without a relevant document are left out)."""
    x, grade, mask = d.queries(600, 1)
    if drop_unjudged:
        keep = (grade > 0).any(-1)
        x, grade, mask = x[keep], grade[keep], mask[keep]
    return d.loaders(d.Rows(x, grade, mask, transform=transform), d.Rows(*d.queries(150, 2)))


def graph_data(augment=d.shuffle_nodes, directed_once: bool = False, first: bool = False) -> dict[str, Any]:
    """200 training graphs (augmented per read by ``augment``) and 50 validation graphs of 32 nodes, half of
    each graph's nodes labelled (at random, or the first 16 with ``first``)."""
    train = d.Rows(*d.graphs(200, 1, directed_once, 0.5, first), transform=augment)
    val = d.Rows(*d.graphs(50, 2, directed_once, 0.5, first))
    return {**d.loaders(train, val, batch_size=16), "num_classes": d.CLASSES}


def anomaly_data(drop=(d.FAULT_A, d.FAULT_B), pair=d.as_pair, val_rows: int = 400) -> dict[str, Any]:
    """The rows of a 2,500-row log whose status is not in ``drop`` (the healthy ones), read as pairs by
    ``pair``, and ``val_rows`` healthy validation rows."""
    train = d.Rows(d.healthy_rows(2500, 1, drop), transform=pair)
    val = d.Rows(d.healthy_rows(val_rows * 5 // 4 + 1, 2)[:val_rows], transform=d.as_pair)
    return d.loaders(train, val, batch_size=64)


def super_res_data(pair=d.crop_pair) -> dict[str, Any]:
    """Random crops of 1,000 training images read as (low, high) pairs by ``pair``, and 300 whole validation
    images with their area-averaged inputs."""
    val = d.shapes(300, 2)
    return d.loaders(d.Rows(d.shapes(1000, 1), transform=pair), d.Rows(d.downsample(val), val))


def localisation_data(augment=d.flip, empty: float = 0.0) -> dict[str, Any]:
    """1,500 training canvases (augmented per read by ``augment``) and 300 validation canvases."""
    train = d.Rows(*d.canvases(1500, 1, empty), transform=augment)
    val = d.Rows(*d.canvases(300, 2, empty))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.KINDS + (1 if empty else 0)}


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
TARGET = "the training targets carry the information the task's metric asks for"
SCHEDULE = "the loop's state machines (optimisation steps, gradient resets, schedulers) advance as declared"
HEALTHY_ONLY = "the training rows are the healthy rows the model is meant to learn, no faults among them"
SAMPLE = "the labelled training nodes are a representative sample of the nodes the model serves"
DEPENDS = "the output depends on what the task says it depends on"
CONVENTION = "the served output is read with the convention the model was trained with"
TRAIN_SERVE = "inputs are made the same way in training as in serving"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "rank_served_as_ranks",
        "learning to rank (ListNet over query groups; served ranked lists)",
        m.RankerServesRanks,
        ranking_data,
        "predict applies argsort twice and returns each document's rank position, which its callers read as "
        "the document indices in ranked order: every served list is the inverse permutation of the right "
        "one.",
        CONVENTION,
    ),
    SealedCase(
        "rank_grades_binarised",
        "learning to rank (ListNet over query groups, graded relevance)",
        m.Ranker,
        partial(ranking_data, d.binarised),
        "The loader cuts the graded labels to relevant or not (grade > 0), a line copied from the click-log "
        "pipeline: the model learns which documents match but never which relevant ones are best, and NDCG "
        "with graded gains drops.",
        TARGET,
    ),
    SealedCase(
        "lambdarank_no_zero_grad",
        "learning to rank (LambdaRank by manual optimisation)",
        m.LambdaRankerNoZeroGrad,
        ranking_data,
        "The hand-written training step never calls optimizer.zero_grad(): every step's gradient is the sum "
        "of all gradients so far, and the updates keep pushing where the first batches pointed.",
        SCHEDULE,
    ),
    SealedCase(
        "gcn_node_shuffle_keeps_graph",
        "graph node classification (dense GCN, node-order shuffling)",
        m.NodeGCN,
        partial(graph_data, d.shuffle_nodes_keep_graph),
        "The node-order shuffle permutes the features, labels and label mask but not the adjacency's rows "
        "and columns: every node is wired to random nodes, and the GCN learns to ignore its neighbours.",
        PAIRED,
    ),
    SealedCase(
        "gcn_loss_on_unlabelled_nodes",
        "graph node classification (dense GCN, half the nodes labelled)",
        m.NodeGCNAllNodes,
        graph_data,
        "The cross-entropy is taken over every node, the labelled-node mask left out: the unlabelled nodes, "
        "stored with label 0, teach the model that most nodes are class 0.",
        TASK_LOSS,
    ),
    SealedCase(
        "gcn_first_half_labelled",
        "graph node classification (dense GCN, which nodes are labelled)",
        m.NodeGCN,
        partial(graph_data, first=True),
        "The labelled half of each graph is taken as its first 16 nodes, but the files store nodes community "
        "by community: the last classes are rarely or never labelled, and the model learns to answer the "
        "first two.",
        SAMPLE,
    ),
    SealedCase(
        "gcn_edges_stored_once",
        "graph node classification (dense GCN, adjacency built from an edge list)",
        m.NodeGCN,
        partial(graph_data, directed_once=True),
        "The dense adjacency is filled from the edge list, which stores each undirected edge once (i < j), "
        "without adding its transpose: each node hears only its higher-numbered neighbours, and the last "
        "nodes hear none.",
        TRAIN_SERVE,
    ),
    SealedCase(
        "autoencoder_trained_on_faults_too",
        "anomaly detection (autoencoder on healthy readings, AUROC)",
        m.AutoEncoder,
        partial(anomaly_data, (d.FAULT_B,)),
        "The healthy rows are picked by dropping status 2, but the log codes faults as 1 (stuck valve) and 2 "
        "(gain drift): the stuck-valve rows stay in the training set, the autoencoder learns to reconstruct "
        "them, and in service they score as the most normal rows of all.",
        HEALTHY_ONLY,
    ),
    SealedCase(
        "autoencoder_skip_connection",
        "anomaly detection (autoencoder, reconstruction error)",
        m.AutoEncoderResidual,
        anomaly_data,
        "The reconstruction is x + decoder(encoder(x)), a skip connection kept from a denoising template: "
        "the network passes every row through, faulty or not, and the reconstruction error no longer tells "
        "them apart.",
        DEPENDS,
    ),
    SealedCase(
        "autoencoder_signed_score",
        "anomaly detection (autoencoder, served anomaly score)",
        m.AutoEncoderSignedScore,
        anomaly_data,
        "The served anomaly score is the mean of the signed residual x - x_hat, the square left out: errors "
        "of opposite signs across the sensors cancel, and faulty rows no longer score above healthy ones.",
        CONVENTION,
    ),
    SealedCase(
        "autoencoder_rows_standardised",
        "anomaly detection (autoencoder with input normalisation)",
        m.AutoEncoderRowScaled,
        anomaly_data,
        "Each row is standardised over its own 24 sensors (a per-sample normalisation copied from an image "
        "pipeline) before it is encoded and scored: a row whose sensor gains all drifted is scaled back onto "
        "the healthy ones.",
        DEPENDS,
    ),
    SealedCase(
        "super_res_strided_inputs",
        "image super-resolution 2x (training pairs)",
        m.SuperRes,
        partial(super_res_data, partial(d.crop_pair, make_input=d.strided)),
        "The training inputs are made by keeping every second pixel (hr[..., ::2, ::2]) while the camera "
        "averages 2 x 2 blocks: the network learns to undo a degradation it never meets in service.",
        TRAIN_SERVE,
    ),
    SealedCase(
        "super_res_crop_offset_odd",
        "image super-resolution 2x (random crops)",
        m.SuperRes,
        partial(super_res_data, partial(d.crop_pair, even=False)),
        "The random crop's offset is drawn per high-resolution pixel and halved with // for the input crop: "
        "two pairs in three are misaligned by one high-resolution pixel, and the network learns a blur.",
        PAIRED,
    ),
    SealedCase(
        "super_res_view_not_pixel_shuffle",
        "image super-resolution 2x (sub-pixel convolution)",
        m.SuperResViewed,
        super_res_data,
        "The 4-channel output is reshaped with .view(n, 1, 2h, 2w) instead of pixel_shuffle: the channels "
        "are laid out as bands of rows, and each output pixel's detail is computed from another part of the "
        "image.",
        DEPENDS,
    ),
    SealedCase(
        "localise_flip_without_swap",
        "single-object localisation (class and box; flip augmentation)",
        m.Localiser,
        partial(localisation_data, d.flip_without_swap),
        "The left-right flip mirrors each x coordinate where it stands (x -> 1 - x) without swapping x_min "
        "and x_max: flipped boxes are inverted, and the model learns boxes of almost no width about the "
        "shape's centre.",
        PAIRED,
    ),
    SealedCase(
        "localise_box_list_broadcast",
        "single-object localisation (class and box; L1 box loss)",
        m.LocaliserBoxListBroadcast,
        localisation_data,
        "The box error is taken against the stored list of one box, (n, 4) minus (n, 1, 4): it broadcasts "
        "over every pair of rows in the batch, and each box is fitted to the batch's boxes on average.",
        TASK_LOSS,
    ),
    SealedCase(
        "localise_served_scale_hw",
        "single-object localisation (served boxes in pixels)",
        m.LocaliserScaledHW,
        localisation_data,
        "The served box is scaled back to pixels with (height, width, height, width), the image-shape order: "
        "on the 24 x 32 canvas every served box is squeezed across and stretched down.",
        CONVENTION,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "rank_listnet_padded_groups",
            "learning to rank (ListNet; padded documents masked out of the loss and the served lists)",
            m.Ranker,
            ranking_data,
        ),
        (
            "rank_lambdarank_manual",
            "learning to rank (LambdaRank: pair weights from the model's own ranking; manual optimisation; "
            "queries without a relevant document dropped)",
            m.LambdaRanker,
            partial(ranking_data, drop_unjudged=True),
        ),
        (
            "gcn_half_labelled_masked",
            "graph node classification (half the nodes unlabelled, stored as 0 and masked out; node order "
            "shuffled)",
            m.NodeGCN,
            graph_data,
        ),
        (
            "gcn_drop_edge",
            "graph node classification (DropEdge: a fifth of the edges removed at random on every read)",
            m.NodeGCN,
            partial(graph_data, d.drop_edges),
        ),
        (
            "autoencoder_denoising_tiny_validation",
            "anomaly detection (a denoising autoencoder: noisy inputs, clean targets; 40 validation rows)",
            m.AutoEncoder,
            partial(anomaly_data, pair=d.with_noise, val_rows=40),
        ),
        (
            "super_res_back_projection_symmetries",
            "image super-resolution (a second loss term compares the output, downsampled, with the input; "
            "each image flipped and turned before its input is made)",
            m.SuperResConsistent,
            partial(super_res_data, partial(d.crop_pair, turn=True)),
        ),
        (
            "localise_nothing_class_masked_box",
            "single-object localisation (a fifth of the canvases empty: a 'nothing' class, box loss masked)",
            m.LocaliserWithNothing,
            partial(localisation_data, empty=0.2),
        ),
        (
            "localise_giou_shifted",
            "single-object localisation (generalised-IoU box loss; random shifts moving the box)",
            m.LocaliserGIoU,
            partial(localisation_data, d.shift),
        ),
    )
]
