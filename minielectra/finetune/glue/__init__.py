"""GLUE as the ELECTRA paper measured it: the tasks and their data (:mod:`.data`), several tasks in
one command (:mod:`.suite`, ``minielectra glue``) and the table in the paper's layout
(:mod:`.table`)."""
