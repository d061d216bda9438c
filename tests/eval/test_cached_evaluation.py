"""A cached evaluation is reused only when it is whole: a damaged summary is set aside and redone."""

import json

import pytest

from forgetbench.eval.runner import EXTRA_NAME, SUMMARY_NAME, cached_evaluation, write_evaluation


def test_a_whole_cached_evaluation_is_reused(tmp_path, capsys):
    write_evaluation(tmp_path, "k", None, {"a": 0.5}, {"mia": [1]}, {"model": "m"})
    assert cached_evaluation(tmp_path, "k") == (None, {"a": 0.5})
    assert cached_evaluation(tmp_path, "other") is None  # another key: not this evaluation
    # One written before summaries carried a checksum is redone, as under another key: silently.
    (tmp_path / SUMMARY_NAME).write_text(json.dumps({"key": "k", "scores": {"a": 0.5}}))
    assert cached_evaluation(tmp_path, "k") is None
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("edited", [SUMMARY_NAME, EXTRA_NAME])
def test_a_hand_edited_evaluation_is_damaged(tmp_path, capsys, edited):
    write_evaluation(tmp_path, "k", None, {"a": 0.5}, {"mia": {"auc": 0.5}}, {"model": "m"})
    path = tmp_path / edited
    path.write_text(path.read_text().replace("0.5", "0.9"))
    assert cached_evaluation(tmp_path, "k") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert (
        f"cached evaluation in {tmp_path} is damaged ({tmp_path} was changed after it was " in err
    )
    assert not (tmp_path / SUMMARY_NAME).exists()  # set aside: the next run recomputes it


def test_damaged_summaries_are_set_aside_with_one_line(tmp_path, capsys):
    for damaged in (
        '{"key": "k", "sco',
        "[1, 2]",
        '{"key": "k"}',
        "\udcff".encode("utf-8", "surrogatepass"),
    ):
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        path = folder / SUMMARY_NAME
        (path.write_bytes if isinstance(damaged, bytes) else path.write_text)(damaged)
        assert cached_evaluation(folder, "k") is None
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("warning: cached evaluation in")
        assert "Traceback" not in err and not path.exists()
        (aside,) = folder.glob(f"{SUMMARY_NAME}.corrupt-*")
        assert aside.read_bytes() == (damaged if isinstance(damaged, bytes) else damaged.encode())
