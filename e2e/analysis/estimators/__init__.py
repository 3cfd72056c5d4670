"""The shared estimators: one comparison on the log scale, the model per cell, shared noise,
the four verdicts, Holm, power, the group-sequential boundaries, the median ratio and the
variance components. The other analysis sub-packages import the module that defines what
they use."""
