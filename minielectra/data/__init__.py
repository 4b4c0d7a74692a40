"""Layer 1, text to examples: corpora, WordPiece, the official example builder, cached and
sharded datasets (lesson 1). Nothing here knows about networks."""
