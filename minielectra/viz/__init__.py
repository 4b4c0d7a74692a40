"""Per-token views of the discriminator: what the generator replaced, and how sure the
discriminator is about every token (plotly figures, ipywidgets, standalone HTML).

Read in this order: :mod:`.scoring` (model in, records out), :mod:`.strip` (the token strip, the
batch heatmap and the checkpoint slider, records in, figures out), :mod:`.timeline` (one sentence
through a run's checkpoints), :mod:`.report` (a run's ``metrics.jsonl``, also live),
:mod:`.heldout` (calibration and precision-recall), :mod:`.widget` (the interactive explorer),
:mod:`.released` (the released ELECTRA-Small beside ours), :mod:`.show` (a notebook figure with a
PNG beside it, for GitHub and nbconvert), :mod:`.page` (standalone HTML, what ``minielectra viz``
calls) and :mod:`.browser` (headless Chromium: screenshots for the tests and the README, PNGs of
figures).
"""
