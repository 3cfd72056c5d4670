"""Numbers across runs, one sub-package per question; pure functions over records already
read, no I/O. Each sub-package's face holds what the other stages call; a test imports the
module that defines what it tests.

* ``estimators``: the shared estimators (one comparison on the log scale, the model per cell,
  shared noise, the four verdicts, Holm, power, the group-sequential boundaries, the median
  ratio, the variance components); every other sub-package stands on them.
* ``sweep``: the sweep's comparison (records -> comparable cells -> comparisons, noise,
  attribution, warnings, the one headline rule).
* ``outputs``: outputs compared prompt by prompt, whether an arm is safe to merge, GSM8K
  agreement (on ``sweep``).
* ``capacity``: a capacity search's margins and estimate.
* ``planning``: the runs a design needs for the effect asked (on ``sweep``).
* ``nightly``: the night's judgement, its history, change points, the outputs check, bisect's
  verdicts and what a nightly design resolves (on ``sweep`` and ``outputs``).

A sub-package imports only those listed before it (``estimators`` at the bottom).
"""

__all__: list[str] = []
