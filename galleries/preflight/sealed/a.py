"""Sealed gallery A (issue #34): contrastive and metric learning, denoising, autoencoders, VAEs, multi-task
heads, knowledge distillation, seq2seq and two-tower retrieval. Written blind; proved by ``test_proofs_a.py``.

Every bug trains without an error and its loss falls, yet its model is measurably worse on clean held-out data
than its healthy twin (the same model and data with the bug fixed), or its validation figure overstates it.
"""

from __future__ import annotations

from functools import partial

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _a_data as data
from galleries.preflight.sealed import _a_models as models

BUGS: list[SealedCase] = [
    SealedCase(
        id="contrastive_views_seeded_by_index",
        task="contrastive",
        model=models.SimCLR,
        data=partial(data.contrastive_data, seeded_views=True),
        bug="Each view's augmentation is seeded with the sample's index for reproducibility, so both "
        "'views' of a sample are the same image and InfoNCE is solved without learning any invariance.",
        invariant="the task is not trivially solved: a positive pair is two different views, not one tensor "
        "twice",
    ),
    SealedCase(
        id="triplet_negative_served_as_positive",
        task="metric learning",
        model=models.TripletNet,
        data=partial(data.triplet_data, negative_first=True),
        bug="The triplet dataset yields (anchor, negative, positive) while the step unpacks (anchor, "
        "positive, negative), so the loss pulls different classes together and pushes same-class digits "
        "apart.",
        invariant="input and target stay paired: the positive the loss pulls in shares the anchor's class",
    ),
    SealedCase(
        id="siamese_gradients_never_zeroed",
        task="metric learning",
        model=partial(models.SiameseVerifier, zero_grad=False),
        data=data.pair_data,
        bug="Manual optimisation with accumulation never calls optimizer.zero_grad(), so every step applies "
        "the running sum of all gradients since the start.",
        invariant="each optimizer step uses the gradients of its own accumulation window",
    ),
    SealedCase(
        id="denoising_noise_added_in_place",
        task="denoising",
        model=models.Denoiser,
        data=partial(data.denoising_data, in_place=True),
        bug="The dataset adds its noise with += to the stored clean image, so the target is the noisy input "
        "itself and the stored images get noisier with every epoch.",
        invariant="data is not changed by reading it (and the input stays distinct from its target)",
    ),
    SealedCase(
        id="denoising_validated_without_noise",
        task="denoising",
        model=models.Denoiser,
        data=partial(data.denoising_data, noisy_validation=False),
        bug="The validation set is built without 'augmentation', and the noise is the augmentation, so "
        "validation scores reconstructing clean digits from clean digits and reports a far lower error than "
        "denoising has.",
        invariant="validation measures what training trains (the same task through the same path)",
    ),
    SealedCase(
        id="autoencoder_epoch_decay_stepped_per_batch",
        task="autoencoder",
        model=partial(models.AutoEncoder, scheduler_interval="step"),
        data=data.image_data,
        bug="A StepLR meant to halve the rate every 4 epochs is configured with interval='step', so the "
        "rate is ~0 after a hundred batches and training stalls early.",
        invariant="the scheduler advances as declared (per epoch, not per batch)",
    ),
    SealedCase(
        id="vae_kl_weight_never_warms_up",
        task="VAE",
        model=partial(models.VAE, stuck_warmup=True),
        data=data.image_data,
        bug="The KL warm-up assigns a local beta instead of self.beta, so the KL term is weighted by 0 for "
        "the whole run and the VAE trains as a plain autoencoder.",
        invariant="every loss term reaches the gradient (no term is weighted by zero for the whole run)",
    ),
    SealedCase(
        id="multitask_regression_target_broadcast",
        task="multi-task",
        model=partial(models.MultiTask, squeeze=False),
        data=data.multitask_data,
        bug="The regression head's (B, 1) output is compared with a (B,) target, which broadcasts to (B, "
        "B), so the head learns the batch mean instead of each sample's value.",
        invariant="each output is compared with its own sample's target",
    ),
    SealedCase(
        id="distillation_teacher_left_trainable",
        task="knowledge distillation",
        model=partial(models.Distiller, freeze_teacher=False),
        data=data.labelled_digit_data,
        bug="The pretrained teacher is a registered submodule left trainable (in the optimizer, in train "
        "mode, outside no_grad), so the KL pulls the teacher towards the untrained student.",
        invariant="the target does not move with the trained parameters (frozen parts are never stepped)",
    ),
    SealedCase(
        id="seq2seq_decoder_input_not_shifted",
        task="seq2seq",
        model=partial(models.Seq2Seq, shift=False),
        data=data.seq2seq_data,
        bug="Teacher forcing feeds the decoder the target unshifted, so each step sees the token it must "
        "predict; the teacher-forced validation accuracy is near perfect while greedy decoding fails.",
        invariant="the output does not depend on the future (the target never reaches its own prediction)",
    ),
    SealedCase(
        id="seq2seq_encoder_state_dropped",
        task="seq2seq",
        model=partial(models.Seq2Seq, pass_state=False),
        data=data.seq2seq_data,
        bug="The decoder starts from a zero state instead of the encoder's final state, so the source never "
        "reaches the loss and the model learns only the targets' own statistics.",
        invariant="every input part reaches the loss",
    ),
    SealedCase(
        id="two_tower_history_contains_target",
        task="two-tower retrieval",
        model=models.TwoTower,
        data=partial(data.two_tower_data, history_has_target=True),
        bug="The user's history is built from the whole interaction log, so it contains the item to "
        "predict; the model learns to retrieve from the history and validation (built the same way) "
        "overstates recall.",
        invariant="no input carries the target (causal split of history and target)",
    ),
    SealedCase(
        id="two_tower_item_tower_under_no_grad",
        task="two-tower retrieval",
        model=partial(models.TwoTower, cache_catalogue=True),
        data=data.two_tower_data,
        bug="The catalogue's item embeddings are computed under torch.no_grad() (meant as an inference "
        "cache) in training too, so the item tower and item embedding table never get a gradient and stay "
        "random.",
        invariant="every parameter that shapes the output gets a gradient",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(
        id="contrastive_infonce_with_temperature",
        task="contrastive",
        model=partial(models.SimCLR, temperature=0.1),
        data=data.contrastive_data,
    ),
    SealedCase(
        id="distillation_t2_scaled_kl",
        task="knowledge distillation",
        model=models.Distiller,
        data=data.labelled_digit_data,
    ),
    SealedCase(
        id="seq2seq_packed_variable_lengths",
        task="seq2seq",
        model=models.Seq2Seq,
        data=data.seq2seq_data,
    ),
    SealedCase(
        id="vae_elbo_summed_over_pixels",
        task="VAE",
        model=models.VAE,
        data=data.image_data,
    ),
    SealedCase(
        id="multitask_uncertainty_weighted_sum",
        task="multi-task",
        model=partial(models.MultiTask, uncertainty_weighting=True),
        data=data.multitask_data,
    ),
    SealedCase(
        id="two_tower_frozen_item_features",
        task="two-tower retrieval",
        model=partial(models.TwoTower, frozen_item_features=True),
        data=data.two_tower_data,
    ),
    SealedCase(
        id="denoising_heavy_dropout",
        task="denoising",
        model=partial(models.Denoiser, dropout=0.5),
        data=data.denoising_data,
    ),
    SealedCase(
        id="siamese_manual_accumulation",
        task="metric learning",
        model=partial(models.SiameseVerifier, lr=0.1),
        data=data.pair_data,
    ),
]
