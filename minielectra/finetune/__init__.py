"""Using the discriminator: fine-tuning on GLUE, SQuAD or your own labelled data (lesson 7).

What every kind of task shares sits here: :mod:`.task` (a task and its examples), :mod:`.classifier`
(the head, its optimiser groups and loss: the paper's recipe), :mod:`.train` (the loop, the dev
set after each epoch, the median of several seeds), :mod:`.windows` (texts longer than the model
reads), :mod:`.metrics`, and the saved model with :mod:`.predict`. :mod:`.run` is
``minielectra finetune``: it picks the kind of task. The kinds each have a folder:

- :mod:`.glue`: the paper's nine GLUE tasks, their data and the results table;
- :mod:`.squad`: extractive question answering (SQuAD 1.1 and 2.0), its span head and scoring;
- :mod:`.owndata`: your own CSV, TSV or JSONL files, or a hub dataset.
"""
