"""Per-token views of the discriminator: what the generator replaced, and how sure the
discriminator is about every token (plotly figures, ipywidgets, standalone HTML). Read
:mod:`.scoring` (model in, records out) first, then :mod:`.strip` (records in, figures out)."""
