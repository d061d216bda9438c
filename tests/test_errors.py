"""Errors keep their message and type across a process boundary (the study's worker pool)."""

import pickle

from forgetbench.errors import ConfigError, DataError, UnknownNameError


def test_errors_survive_pickling_with_type_and_message():
    errors = [
        DataError("data/x.json is missing", "generate it first"),
        ConfigError("unknown key 'lrr'"),
        UnknownNameError("method", "np0", ["npo", "rmu"]),
    ]
    for error in errors:
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error)
        assert (copy.what, copy.hint, str(copy)) == (error.what, error.hint, str(error))
        assert copy.exit_code == error.exit_code
    assert "did you mean 'npo'?" in str(errors[2])
