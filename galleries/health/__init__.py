"""``HealthMonitor``'s galleries: ``field`` (issue #25: runs that differ from the monitor's own gallery,
``tests/helpers/health_gallery.py``, written blind by two engineers) and the sealed zoos ``zoo1`` to ``zoo11``
(issues #35/#36, each written blind by a helper who read none of the monitor's rules, scored once with its
``score.py``, and used to mend the monitor since, so no longer blind). ``sealed_zoo.py`` holds what the zoos
share; ``benchmarks/health_repair.py --zoo galleries.health.zooN`` runs a zoo's repairable cases.
"""
