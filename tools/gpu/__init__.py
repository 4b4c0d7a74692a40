"""The stages of ``tools/gpu_check.py``, one module per kind of check.

``common`` holds what every stage shares (the context, subprocesses, toy shapes); ``numerics``,
``graph``, ``speed``, ``runs`` and ``lessons`` are the stages; ``pack`` builds the carried folder;
``tables`` writes measured figures from the results JSON into the README and the Small guide.
"""
