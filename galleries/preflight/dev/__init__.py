"""The development gallery of issue #34: real, silent bugs and healthy look-alikes across task types
(classification, keypoint regression, distillation, seq2seq, quantile regression, contrastive pairs,
autoencoders, multi-task, token tagging, segmentation, forecasting, tabular codes), which the rebuilt
preflight is developed against. A separate sealed gallery (``tests.checks.sealed_gallery``) is scored once
at the end.

``cases.py`` lists :data:`~tests.checks.dev_gallery.cases.BUGS` and
:data:`~tests.checks.dev_gallery.cases.HEALTHY` (:class:`SealedCase` records, the sealed gallery's format).
Every bug is proved real against its healthy twin in plain torch and Lightning
(``tests/checks/test_dev_gallery_proofs.py``); ``python -m tests.checks.dev_gallery.score`` runs the preflight
on every case and prints the score."""

from tests.checks.sealed_gallery import SealedCase

__all__ = ["SealedCase"]
