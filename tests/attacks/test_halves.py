import pytest

from forgetbench.attacks.halves import author_groups, split_halves
from forgetbench.errors import DataError
from forgetbench.records import QARecord


def records(n: int, entity=None) -> list[QARecord]:
    return [QARecord(f"q{i}", f"a{i}", entity=entity(i) if entity else None) for i in range(n)]


def test_each_author_is_cut_in_two_disjoint_halves():
    halves = split_halves(records(40), seed=0, questions_per_author=20)
    assert len(halves.a) == len(halves.b) == 20
    assert set(halves.a).isdisjoint(halves.b) and set(halves.a) | set(halves.b) == set(range(40))
    for group in (range(0, 20), range(20, 40)):
        assert len(set(group) & set(halves.a)) == 10


def test_the_split_is_seeded():
    assert split_halves(records(20), seed=1) == split_halves(records(20), seed=1)
    assert split_halves(records(20), seed=1).a != split_halves(records(20), seed=2).a


def test_authors_come_from_entities_when_every_record_names_one():
    # Interleaved authors: blocks of 20 would be wrong, the entity is right.
    rs = records(12, entity=lambda i: f"author-{i % 3}")
    assert author_groups(rs) == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]
    halves = split_halves(rs, seed=0)
    for group in author_groups(rs):
        assert len(set(group) & set(halves.a)) == 2


def test_an_odd_author_gives_b_the_extra_question():
    halves = split_halves(records(5), seed=0, questions_per_author=5)
    assert (len(halves.a), len(halves.b)) == (2, 3)


def test_an_author_with_one_question_cannot_be_split():
    with pytest.raises(DataError, match="at least 2 questions per forget author"):
        split_halves(records(21), seed=0, questions_per_author=20)
