"""One rule for where a lesson looks for ``runs/nano``: the course root that ``minielectra lessons``
made, found from any notebook inside it (``notebooks/``, ``notebooks/solutions/``)."""

import shutil
from pathlib import Path

import pytest

from minielectra.course import course_path, course_root
from minielectra.lessons import copy_lessons
from minielectra.model.storage import BUNDLED


@pytest.fixture
def course(tmp_path) -> Path:
    """A copied course with a run trained from its root: ``runs/nano`` (the bundled checkpoint's
    files stand in for the run's)."""
    root = tmp_path / "electra-course"
    copy_lessons(root)
    shutil.copytree(BUNDLED, root / "runs" / "nano")
    return root


@pytest.mark.parametrize("where", ["", "notebooks", "notebooks/solutions", "tutorial"])
def test_runs_nano_trained_from_the_root_is_found_from_every_folder_of_the_course(
        course, where, monkeypatch):
    monkeypatch.chdir(course / where)
    assert course_root() == course
    found = course_path("runs/nano")
    assert found.resolve() == (course / "runs" / "nano").resolve()
    assert (found / "config.json").is_file()


def test_the_course_root_is_the_record_not_any_folder_with_notebooks(course, monkeypatch):
    """The learner's own ``notebooks/`` inside the course does not move the root."""
    mine = course / "notebooks" / "solutions" / "mine"
    (mine / "notebooks").mkdir(parents=True)
    (mine / "tutorial").mkdir()
    assert course_root(mine) == course
    shutil.rmtree(course / "tutorial")  # deleted by the learner: the record still says where
    assert course_root(course / "notebooks" / "solutions") == course


def test_in_a_checkout_the_root_is_the_repository(tmp_path):
    (tmp_path / "notebooks" / "solutions").mkdir(parents=True)
    (tmp_path / "tutorial").mkdir()
    assert course_root(tmp_path / "notebooks" / "solutions") == tmp_path


def test_a_path_that_exists_where_the_notebook_runs_is_taken_as_given(course, monkeypatch):
    monkeypatch.chdir(course / "notebooks")
    assert course_path("../runs/nano") == Path("../runs/nano")
    local = course / "notebooks" / "runs" / "nano"
    local.mkdir(parents=True)
    assert course_path("runs/nano") == Path("runs/nano")  # the notebook's own folder first
    assert course_path(course / "runs" / "nano") == course / "runs" / "nano"


def test_outside_a_course_or_missing_the_path_is_unchanged(course, tmp_path, monkeypatch):
    monkeypatch.chdir(course / "notebooks")
    assert course_path("runs/mini") == Path("runs/mini")  # the error names what was typed
    assert course_path("bundled") == Path("bundled")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert course_root() is None
    assert course_path("runs/nano") == Path("runs/nano")


def test_the_explorer_offers_and_loads_the_course_roots_runs(course, monkeypatch):
    from minielectra.viz.widget import Explorer
    monkeypatch.chdir(course / "notebooks" / "solutions")
    explorer = Explorer("runs/nano", "the cat sat on the mat .")
    assert "runs/nano" in explorer.checkpoint.options
    assert explorer.message.value == "" and explorer.records
    assert explorer.figure.layout.title.text.startswith("runs/nano:")
