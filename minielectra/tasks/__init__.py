"""Layer 5, using the discriminator: GLUE and your own labelled data, the paper's fine-tuning
recipe, saved models and prediction (lesson 7)."""
