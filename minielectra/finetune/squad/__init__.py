"""SQuAD 1.1 and 2.0: the official JSON (:mod:`.data`), questions and passages as windows
(:mod:`.features`), the span head (:mod:`.model`), fine-tuning (:mod:`.train`), from logits to
answers (:mod:`.post`), the official scoring (:mod:`.eval`) and answering new questions
(:mod:`.predict`)."""
