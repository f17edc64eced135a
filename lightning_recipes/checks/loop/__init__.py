"""Loop stage: the optimisation loop's state machines (optimizer steps, schedules, the validation path)."""
