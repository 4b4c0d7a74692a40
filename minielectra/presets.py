"""Named presets: each is a dict of dotted overrides applied to the defaults (= ELECTRA-Small).

``minielectra.config.preset(name)`` turns one into a :class:`~minielectra.config.RunConfig`; the
comments say why each value is what it is.
"""

from __future__ import annotations

from typing import Any


PRESETS: dict[str, dict[str, Any]] = {
    # GPU presets save and evaluate every 10k steps (1% of Small's run): with the defaults (only
    # at the end) an interruption on day two would lose everything.
    # The paper's models train with BERT's uncased WordPiece (30,522 tokens, model.vocab_size).
    "small": {"data.vocab": "bert-uncased", "train.save_every": 10_000,
              "train.eval_every": 10_000, "train.out_dir": "runs/small"},
    "small++": {  # released google/electra-small-* checkpoints
        "model.generator_size": 1.0,
        "data.vocab": "bert-uncased",
        "data.max_seq_len": 512,
        "train.max_steps": 4_000_000, "train.save_every": 10_000, "train.eval_every": 10_000,
        "train.out_dir": "runs/small++",
    },
    "base": {
        "model.embedding_size": 768, "model.hidden_size": 768, "model.num_heads": 12,
        "model.intermediate_size": 3072, "model.generator_size": 1 / 3,
        "data.vocab": "bert-uncased", "data.max_seq_len": 512, "train.batch_size": 256,
        "train.learning_rate": 2e-4, "train.max_steps": 766_000, "train.save_every": 10_000,
        "train.eval_every": 10_000, "train.out_dir": "runs/base",
    },
    # CPU presets: tuned for held-out discriminator AUC per wall-clock minute on 2 cores (measured
    # in research/learning_curve.py). The objective is the paper's; size, data and
    # optimisation differ, each for a measured reason:
    # - data.max_seq_len=16: before a discriminator has learned *where* to look, its attention is
    #   ~uniform, i.e. an average over the whole sequence; over 16 tokens that average is a local
    #   context window, over 64 it is mostly noise. At 64 tokens the discriminator learned no
    #   context at all within 5 minutes (held-out AUC ~0.57 = token identity only); at 16 it does.
    #   (16 also means ~3 of 16 tokens are [CLS]/[SEP], which are never replaced: `disc_auc`
    #   counts them, `disc_auc_text` does not; we report both.)
    # - model.generator_size tiny (hidden 4): the generator's skill sets the discriminator's
    #   difficulty. With the paper's 1/4 the generator improves as fast as the discriminator and
    #   the AUC stays ~0.62 for the whole run; a near-unigram generator keeps fakes detectable
    #   from context, which is what the discriminator then visibly learns. (For downstream
    #   quality the paper's 1/4-1/2 is better: use --preset small.)
    # - lr 1e-3 with bias-corrected Adam and a short warmup: 2e-3 and 5e-3 were worse. Without
    #   the correction the early updates are up to 6.5x larger (training/optim.py); held-out AUC
    #   at step 200 fell from 0.661 to 0.627 (seed 0, tutorial chapter 05).
    "nano": {
        "model.vocab_size": 4096, "data.vocab_size": 4096,
        "model.embedding_size": 128, "model.hidden_size": 128, "model.num_layers": 2,
        "model.num_heads": 4, "model.intermediate_size": 512, "model.generator_size": 1 / 32,
        "model.max_position_embeddings": 128, "model.dropout": 0.0, "model.attention_dropout": 0.0,
        # 5% held out (~20 stdlib modules, ~1000 examples): 2% gave ~180 examples, too few
        # for a stable AUC.
        "data.corpus": "pydocs", "data.max_seq_len": 16, "data.held_out_fraction": 0.05,
        "train.batch_size": 128, "train.max_steps": 2000, "train.learning_rate": 1e-3,
        "train.warmup_steps": 100, "train.schedule": "linear", "train.bias_correction": True,
        "train.log_every": 10, "train.eval_every": 250, "train.eval_examples": 2048,
        "train.milestones": (), "train.max_minutes": 4.5, "train.out_dir": "runs/nano",
    },
    # mini: nano's model on real English, twice the sequence length, 4x the steps, the paper's
    # generator shape (1/8 here, between nano's 1/32 and the paper's 1/4). Its discriminator's AUC
    # creeps to ~0.66 for 4000 steps and then climbs to ~0.86 (research/learning_curve.py).
    # The bundled checkpoint (minielectra/assets/bundled) is this preset with the paper's 1/4
    # generator, 15,000 steps and every selected token masked (objective.mask_token_prob=1.0):
    # a lower AUC against its stronger generator, but better word order and few-label
    # fine-tuning (its MODEL_CARD.md).
    "mini": {
        "model.vocab_size": 4096, "data.vocab_size": 4096,
        "model.embedding_size": 128, "model.hidden_size": 128, "model.num_layers": 2,
        "model.num_heads": 4, "model.intermediate_size": 512, "model.generator_size": 0.125,
        "model.max_position_embeddings": 128, "model.dropout": 0.0, "model.attention_dropout": 0.0,
        "data.corpus": "pretrain-en+pydocs", "data.max_seq_len": 32,
        "data.held_out_fraction": 0.02,
        "train.batch_size": 128, "train.max_steps": 8000, "train.learning_rate": 1e-3,
        "train.warmup_steps": 200, "train.schedule": "linear", "train.bias_correction": True,
        "train.log_every": 10, "train.eval_every": 500, "train.eval_examples": 512,
        "train.save_every": 1000, "train.keep_last": 1, "train.max_minutes": 60.0,
        "train.out_dir": "runs/mini",
    },
}

# laptop: the checkpoint a learner pre-trains on two cores, to fine-tune: mini's model with the
# paper's 1/4 generator and every selected token masked (the bundled checkpoint's choices), on
# BERT's two lengths: 32 tokens, then the last tenth of the steps at 128 (fine-tuning reads
# 128). Started at 128, neither network leaves its unigram plateau within hours; started at 32,
# attention first finds its neighbours (docs/results/suite.md).
PRESETS["laptop"] = {
    **PRESETS["mini"], "model.generator_size": 0.25, "objective.mask_token_prob": 1.0,
    "data.long_seq_len": 128, "data.long_fraction": 0.1,
    "train.max_steps": 12_000, "train.eval_every": 1000, "train.eval_examples": 1024,
    "train.max_minutes": 180.0, "train.out_dir": "runs/laptop",
}

# tiny: nano shrunk to a one-layer model of width 16 on 16-token examples, 6 steps of 4. It learns
# nothing and runs in seconds: the tests share it, and it tries a command end to end.
PRESETS["tiny"] = {
    **PRESETS["nano"],
    "model.vocab_size": 64, "data.vocab_size": 64,
    "model.embedding_size": 8, "model.hidden_size": 16, "model.num_layers": 1,
    "model.num_heads": 2, "model.intermediate_size": 32, "model.max_position_embeddings": 16,
    "model.generator_size": 0.5,
    # a WordPiece trained on the corpus numbers its specials [PAD] [UNK] [CLS] [SEP] [MASK]
    "model.cls_token_id": 2, "model.sep_token_id": 3, "model.mask_token_id": 4,
    "data.max_seq_len": 16, "data.held_out_fraction": 0.2, "data.num_workers": 1,
    "train.batch_size": 4, "train.max_steps": 6, "train.warmup_steps": 2, "train.log_every": 1,
    "train.eval_examples": 8, "train.max_minutes": 0.0, "train.milestones": (),
    "train.out_dir": "runs/tiny",
}
