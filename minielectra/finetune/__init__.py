"""Using the discriminator: fine-tuning on GLUE, SQuAD or your own labelled data (lesson 7).

Shared by every kind of task: :mod:`.task`, :mod:`.classifier` (the paper's recipe), :mod:`.train`
(the loop and the median of seeds), :mod:`.windows` (long texts), :mod:`.metrics`, and the saved
model with :mod:`.predict`; :mod:`.run` is ``minielectra finetune``. Each kind has a folder:
:mod:`.glue` (the paper's nine tasks and the table), :mod:`.squad` (extractive question answering)
and :mod:`.owndata` (your own CSV, TSV or JSONL files, or a hub dataset).
"""
