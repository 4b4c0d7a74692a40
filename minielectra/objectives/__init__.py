"""Pre-training objectives: ELECTRA and the alternatives the paper compares it with (section 3.2,
Table 5), one swappable piece of the training loop (``objective.name``, :mod:`.compute`). The MLM
baselines' own head lives here too (:mod:`.masked_lm`); :mod:`.compute` builds or loads the
model an objective trains."""
