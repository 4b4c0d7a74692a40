"""The paper's central experiments, runnable with one command each (``minielectra experiment
NAME``): ELECTRA against BERT-style MLM at equal compute, Table 5's objectives, and the ablations
of section 3.2 (generator size, weight tying, ALECTRA's layer sharing), with tables and figures."""
