"""How a gateway divides its descriptors at start (``plan_descriptors``): connections get at most
half of what the reserve leaves when the log keeps files here, all of it otherwise."""

from __future__ import annotations

from service.server.descriptors import plan_descriptors


def test_the_default_is_lowered_to_half_of_what_a_small_limit_leaves() -> None:
    plan = plan_descriptors(1024, 1024, 1000, explicit=False, sealed_fds=128)
    assert (plan.connections, plan.files, plan.warns) == (384, 384, False)
    assert plan.limit_for(1000) == 2256  # at which 1000 connections leave 1000 for files
    assert "384 for client connections (max_connections=1000 (the default) lowered" in plan.line()
    assert "ulimit -n 1024 (already the hard limit)" in plan.line()


def test_what_fits_is_kept_and_a_configured_value_that_does_not_is_warned_of() -> None:
    roomy = plan_descriptors(65536, 1024, 1000, explicit=True, sealed_fds=128)
    assert (roomy.connections, roomy.lowered, roomy.warns) == (1000, False, False)
    line = roomy.line()
    assert "ulimit -n 65536 (raised from 1024); 1000 for client connections (max_connections)," in line
    tight = plan_descriptors(1024, 1024, 2000, explicit=True, sealed_fds=128)
    assert (tight.connections, tight.warns) == (384, True)
    assert "(configured)" in tight.line() and "a ulimit -n of 4256 admits 2000" in tight.line()


def test_a_log_without_files_here_leaves_connections_all_but_the_backends_share() -> None:
    plan = plan_descriptors(1024, 1024, 1000, explicit=False, sealed_fds=None)
    assert plan.connections == 1024 - 128
    assert "partitions' files" not in plan.line() and "sealed" not in plan.line()
    assert plan_descriptors(100, 100, 1000, explicit=False, sealed_fds=128).connections == 1  # never 0
