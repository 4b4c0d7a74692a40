"""Your own labelled data: CSV, TSV or JSONL files or a hub dataset as a task (:mod:`.data`), and
the texts ``minielectra predict --file`` scores (:mod:`.inputs`)."""
