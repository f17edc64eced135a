"""HealthMonitor's sealed zoo 20 (issue #35): density estimation with a normalising flow, few-shot episodes,
behaviour cloning, domain adaptation, keypoint heatmaps and a tabular classifier; blind pairs, runs a repair
could save and healthy look-alikes, written blind by a helper who read none of the monitor's rules; proved
with plain torch and Lightning (``test_proofs.py``), to be scored once (``score.py``)."""
