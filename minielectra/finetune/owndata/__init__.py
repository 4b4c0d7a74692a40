"""Your own labelled data: CSV, TSV or JSONL files or a hub dataset as a task (:mod:`.data`); the
files are read by :mod:`minielectra.finetune.tables`."""
