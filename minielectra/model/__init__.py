"""Layer 2, the networks and their files: attention, the transformer, the ELECTRA objective
(lessons 2-4), our checkpoint format and transformers' (never importing the model class)."""
