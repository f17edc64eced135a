"""The preflight's galleries: ``families`` (written by the checks' authors, one family per check, and a blind
hold-out), ``stage`` (issue #24, written blind: a bug in every stage of the loop), ``dev`` (issue #34's
development set, which the checks were developed against: not blind) and ``sealed`` (issue #34's sets A-F,
each written blind by helpers who read none of the checks' code, scored once, and used to mend the checks
since, so no longer blind). ``dev/score.py`` scores the dev and sealed sets (``--gallery``).
"""
