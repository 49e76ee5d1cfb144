"""hashed_once: a frozen dataclass hashed once per object, equal objects still equal and hashed alike."""

from __future__ import annotations

import pickle
from dataclasses import dataclass, replace

import pytest
from gpu_execution_pack.hashed import hashed_once
from gpu_execution_pack.scenario import library


def test_equal_scenarios_built_apart_hash_alike_and_find_each_other():
    first, again = library.training(), library.training()
    assert first is not again and first == again
    assert hash(first) == hash(again) and {first: "kept"}[again] == "kept"
    renamed = replace(first, name=first.name + "-other")
    assert renamed != first and renamed not in {first: "kept"}


def test_a_pickle_carries_no_hash_from_its_process():
    scenario = library.training()
    hash(scenario)
    assert "_hash" in scenario.__dict__
    copy = pickle.loads(pickle.dumps(scenario))
    assert "_hash" not in copy.__dict__ and copy == scenario and hash(copy) == hash(scenario)


def test_only_a_frozen_dataclass_is_taken():
    @dataclass
    class Mutable:
        value: int

    with pytest.raises(TypeError, match="frozen dataclass, not Mutable"):
        hashed_once(Mutable)
