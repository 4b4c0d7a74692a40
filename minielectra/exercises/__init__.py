"""The course's exercises: one check per piece a learner writes, in plain words.

Each lesson ends with a stub (a function whose body is ``raise NotImplementedError``) and a
check cell::

    from minielectra.exercises.checks import check_attention
    attention = check_attention(attention)

A check runs the learner's function on small seeded inputs and compares it with the library's
piece. It returns the function to go on with: the learner's when it is right, the library's
while the stub is still empty (and it says so), so a lesson runs top to bottom either way. A
wrong answer raises :class:`.judge.NotYet` with a sentence that names the likely mistake (the
mistakes learners actually make, listed beside each check), not a tensor diff.

:mod:`.checks` holds lessons 01-04 and 06-08, :mod:`.step` lesson 05's training step, and
:mod:`.judge` how both compare.
"""
