"""The fair share of a limit: what one holder may take, what is left for the others."""

from __future__ import annotations

import pytest

from service.core.acl import ANONYMOUS, Caller
from service.core.fair import FairCounter, FairShare, holder_of
from service.errors import BackendUnavailable


def counter(total: int, share: int) -> FairCounter:
    return FairCounter(FairShare(total, share, "things"), lambda why: BackendUnavailable(why))


def test_a_holder_at_its_share_leaves_the_rest_to_others() -> None:
    things = counter(total=5, share=2)
    held = [things.take("a"), things.take("a")]
    assert things.try_take("a") is None and "one client may hold" in (things.refusal("a") or "")
    others = [things.take("b"), things.take("b"), things.take("c")]
    with pytest.raises(BackendUnavailable, match="This gateway holds 5 things"):
        things.take("d")  # the whole limit is named when that is what is reached
    held[0].release()
    held[0].release()  # once is all it counts
    assert things.open == 4 and things.held_by("a") == 1
    assert things.try_take("d") is not None
    for hold in [held[1], *others]:
        hold.release()
    assert things.open == 1 and things.held_by("a") == 0


def test_a_block_holds_its_place_until_it_ends_however_it_ends() -> None:
    things = counter(total=1, share=1)
    with pytest.raises(RuntimeError), things.hold("a"):
        assert things.open == 1
        raise RuntimeError
    assert things.open == 0


def test_whose_share_a_caller_draws_on() -> None:
    assert holder_of(Caller("User:alice", "10.0.0.1")) == "User:alice"
    assert holder_of(Caller(ANONYMOUS, "10.0.0.1")) == "address 10.0.0.1"
    assert holder_of(Caller(ANONYMOUS, None)) == ANONYMOUS
