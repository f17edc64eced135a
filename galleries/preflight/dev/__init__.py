"""The development gallery of issue #34: real, silent bugs and healthy look-alikes across task types
(classification, keypoint regression, distillation, seq2seq, quantile regression, contrastive pairs,
autoencoders, multi-task, token tagging, segmentation, forecasting, tabular codes), which the rebuilt
preflight is developed against. A separate sealed gallery (``galleries.preflight.sealed``) is scored once
at the end.

``cases.py`` lists :data:`~galleries.preflight.dev.cases.BUGS` and
:data:`~galleries.preflight.dev.cases.HEALTHY` (:class:`SealedCase` records, the sealed gallery's format).
Every bug is proved real against its healthy twin in plain torch and Lightning
(``galleries/preflight/dev/test_proofs.py``); ``python -m galleries.preflight.dev.score`` runs the preflight
on every case and prints the score."""

from galleries.preflight.sealed import SealedCase

__all__ = ["SealedCase"]
