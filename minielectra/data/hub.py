"""Corpora from the Hugging Face hub, streamed through ``datasets`` and never loaded whole.

``datasets`` is imported only when the hub is used (it is slow to import). Offline, it retries
each request for about 25 seconds: :func:`hub_unreachable` asks once per process and then
switches it to offline mode, so a cached dataset still loads and anything else fails at once.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlparse
from typing import Iterable, Iterator

from .documents import Corpus, split_documents

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class HubSpec:
    """A hub dataset's train split and how its rows become documents."""

    path: str
    config: str | None = None
    rows: str = "documents"  # one of HUB_ROWS: what one row of the dataset is
    column: str | None = None  # None: "text" if present, else the first string column
    revision: str | None = None  # None: the newest commit, resolved once per corpus
    streaming: bool = True  # False only for small datasets: downloaded, then memory-mapped


HUB_ROWS = ("documents", "lines", "wikitext")


_HUB_OPTIONS = ("rows", "column", "revision")


HUB_CORPORA = {
    "wikitext-2": HubSpec("wikitext", "wikitext-2-raw-v1", rows="wikitext", streaming=False),
    "wikitext-103": HubSpec("wikitext", "wikitext-103-raw-v1", rows="wikitext"),
    "openwebtext": HubSpec("Skylion007/openwebtext"),
}


def parse_hub_spec(spec: str) -> HubSpec:
    """``hf:<name>[:<config>][:rows=...][:column=...][:revision=...]`` -> :class:`HubSpec`."""
    usage = ("expected hf:<name>[:<config>][:rows=documents|lines|wikitext][:column=NAME]"
             "[:revision=REV]")
    names, options = [], {}
    for part in spec.removeprefix("hf:").split(":"):
        key, is_option, value = part.partition("=")
        if not is_option:
            if options or not part:
                raise ValueError(f"corpus {spec!r}: {part!r} is not where a name or config goes; "
                                 f"{usage}")
            names.append(part)
        elif key not in _HUB_OPTIONS:
            raise ValueError(f"corpus {spec!r}: unknown option {key!r} (options: "
                             f"{', '.join(_HUB_OPTIONS)}); {usage}")
        elif not value or key in options:
            raise ValueError(f"corpus {spec!r}: option {key!r} is empty or given twice; {usage}")
        else:
            options[key] = value
    if not 1 <= len(names) <= 2:
        raise ValueError(f"corpus {spec!r}: {len(names)} name parts; {usage}")
    if options.get("rows", "documents") not in HUB_ROWS:
        raise ValueError(f"corpus {spec!r}: rows={options['rows']!r} is not one of "
                         f"{', '.join(HUB_ROWS)}")
    return HubSpec(*names, **options)


def hub_documents(rows: Iterable[dict], name: str, *, rows_are: str = "documents",
                  column: str | None = None) -> Iterator[list[str]]:
    """Documents from the rows of a ``datasets`` dataset (``rows_are``: one of ``HUB_ROWS``)."""
    texts = (_text_of(row, name, column) for row in rows)
    if rows_are == "wikitext":  # rows are the lines of the raw files
        return split_documents((t.strip() for t in texts), wikitext=True)
    if rows_are == "lines":  # the official format, one row per line
        return split_documents(ln.strip() for t in texts for ln in t.strip().split("\n"))
    docs = ([ln for ln in (s.strip() for s in t.split("\n")) if ln] for t in texts)
    return (d for d in docs if d)


def _text_of(row: dict, name: str, column: str | None) -> str:
    if column is not None:
        if not isinstance(row.get(column), str):
            raise ValueError(f"corpus {name!r}: column {column!r} is "
                             + ("missing" if column not in row else
                                f"{type(row[column]).__name__}, not text")
                             + f" (columns: {sorted(row)})")
        return row[column]
    if isinstance(row.get("text"), str):
        return row["text"]
    for value in row.values():
        if isinstance(value, str):
            return value
    raise ValueError(f"corpus {name!r}: rows have no text column (columns: {sorted(row)}); "
                     "name one with :column=NAME")


_PROBED: list[str | None] = []  # the probe's answer, once per process


def hub_unreachable(*, timeout: float = 3.0) -> str | None:
    """Why the Hugging Face hub cannot be reached from here, or None when it can. When it cannot,
    ``datasets`` is switched to offline mode (cache only, no retries) for this process."""
    if not _PROBED:
        _PROBED.append(_probe(timeout))
        if _PROBED[0] is not None:
            _go_offline()
    return _PROBED[0]


def _probe(timeout: float) -> str | None:
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes", "on"):
            return f"{var} is set"
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = url.hostname or "huggingface.co", url.port or (80 if url.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        return f"no connection to {host}:{port}: {e.strerror or e or 'timed out'}"
    return None


def _go_offline() -> None:
    """``datasets`` and ``huggingface_hub`` read these at import; set both the environment (for
    later imports) and the imported modules' copies."""
    os.environ["HF_HUB_OFFLINE"] = os.environ["HF_DATASETS_OFFLINE"] = "1"
    import sys
    for module in ("huggingface_hub.constants", "datasets.config"):
        if module in sys.modules:
            setattr(sys.modules[module], "HF_HUB_OFFLINE", True)
            if hasattr(sys.modules[module], "HF_DATASETS_OFFLINE"):
                setattr(sys.modules[module], "HF_DATASETS_OFFLINE", True)


def _hub_error(name: str, hub: HubSpec, e: Exception) -> Exception:
    """The error to raise when the hub fails: a missing train split is the user's to fix."""
    if isinstance(e, ValueError) and "split" in str(e).lower() and "train" in str(e):
        return ValueError(f"corpus {name!r}: hub dataset {hub.path!r} (config {hub.config!r}) has "
                          f"no 'train' split ({e}). Pre-training reads the train split and holds "
                          "out documents from it; pick a dataset or config that has one.")
    offline = hub_unreachable()
    if offline:
        return RuntimeError(f"corpus {name!r}: no local copy (not in a data dir, nor in the "
                            f"datasets cache) and the Hugging Face hub is unreachable ({offline});"
                            f" set MINIELECTRA_DATA_DIR to a data dir with a {name}/ folder, or "
                            "use a path (--corpus FILE) or 'pydocs'")
    return RuntimeError(f"corpus {name!r}: could not load {hub.path!r} (config {hub.config!r}) "
                        f"from the Hugging Face hub: {e}. Offline? Point MINIELECTRA_DATA_DIR at a "
                        f"data dir with a {name}/ folder, or use a path or 'pydocs'.")


def _hub_revision(name: str, hub: HubSpec) -> str:
    """The commit the dataset will be read at, so that caches know when the data changed."""
    hub_unreachable()  # offline: the cache only, at once, not 25 s of retries
    import datasets  # imported here: it is slow to import and only the hub needs it

    try:
        builder = datasets.load_dataset_builder(hub.path, hub.config, revision=hub.revision)
    except Exception as e:
        raise _hub_error(name, hub, e) from e
    splits = builder.info.splits  # known from the dataset card, when it has them
    if splits and "train" not in splits:
        raise _hub_error(name, hub, ValueError(f"splits: {sorted(splits)}, no train split"))
    return builder.hash or hub.revision or "unknown"  # builder.hash: the hub commit (40 hex)


def hub_corpus(name: str, hub: HubSpec) -> Corpus:
    revision: list[str] = []  # resolved on first use; reading then pins that commit

    def commit() -> str:
        if not revision:
            revision.append(_hub_revision(name, hub))
        return revision[0]

    def documents():
        import datasets

        # Read at the commit the cache key names (a hub dataset's builder hash is its commit).
        pinned = commit() if re.fullmatch(r"[0-9a-f]{40}", commit()) else hub.revision
        kwargs = {"split": "train", "streaming": hub.streaming, "revision": pinned}
        log.info("corpus %s: datasets.load_dataset(%r, %r, %s)", name, hub.path, hub.config,
                 ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))
        try:
            rows = datasets.load_dataset(hub.path, hub.config, **kwargs)
        except Exception as e:  # offline, unknown name, no train split: say which and what to do
            raise _hub_error(name, hub, e) from e
        return hub_documents(rows, name, rows_are=hub.rows, column=hub.column)
    return Corpus(name, documents, streamed=hub.streaming, fingerprint=lambda: (
        f"hub:{hub.path}:{hub.config}:train:rows={hub.rows}:column={hub.column}@{commit()}"))
