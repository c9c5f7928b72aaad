"""The push sender against a real receiver: the checked address is the one connected to, a name
that resolves elsewhere later is refused then, no redirect is followed, an answer is read only so far."""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

import pytest
import trustme

from service.adapters.push_sender import HttpPushSender
from service.core.push.destinations import DestinationRefused, Destinations, IpAddress, parse_url
from service.core.push.ports import PushRequest
from tests.push_receiver import Answer, Received, Receiver


class Rebinding:
    """A resolver whose answer for every name is the next of ``answers`` (the last one kept)."""

    def __init__(self, *answers: str) -> None:
        self.answers = [ipaddress.ip_address(a) for a in answers]
        self.asked: list[str] = []

    async def __call__(self, host: str, port: int) -> list[IpAddress]:
        self.asked.append(host)
        return [self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]]


def request(url: str) -> PushRequest:
    return PushRequest(parse_url(url), b'{"records":[]}', (("content-type", "application/json"),), 2000)


async def test_the_request_goes_to_the_checked_address_with_the_name_in_host(receiver: Receiver) -> None:
    resolver = Rebinding("127.0.0.1")
    sender = HttpPushSender(resolver=resolver)
    rules = Destinations([f"http://hooks.test:{receiver.port}", "127.0.0.1"])
    try:
        outcome = await sender.send(request(f"http://hooks.test:{receiver.port}/hook"), rules)
    finally:
        await sender.stop()
    assert outcome.status == 204
    assert resolver.asked == ["hooks.test"]
    assert receiver.received[0].headers["host"] == f"hooks.test:{receiver.port}"


async def test_a_name_that_resolves_to_loopback_after_creation_is_refused_at_delivery(
    receiver: Receiver,
) -> None:
    # at creation it leads to 127.0.0.1, which the operator named; then to 127.0.0.2, which nobody did
    resolver = Rebinding("127.0.0.1", "127.0.0.2")
    sender = HttpPushSender(resolver=resolver)
    rules = Destinations([f"http://hooks.test:{receiver.port}", "127.0.0.1"])
    target = parse_url(f"http://hooks.test:{receiver.port}/hook")
    try:
        await sender.check(target, rules)  # what creating the subscription asks
        outcome = await sender.send(request(f"http://hooks.test:{receiver.port}/hook"), rules)
        with pytest.raises(DestinationRefused, match=r"127\.0\.0\.2"):
            await sender.check(target, rules)
    finally:
        await sender.stop()
    assert outcome.status is None and "127.0.0.2" in (outcome.error or "")
    assert receiver.received == []


async def test_redirects_are_not_followed_and_answers_are_read_only_so_far(receiver: Receiver) -> None:
    def answer(n: int, r: Received) -> Answer:
        return 307, {"location": "http://169.254.169.254/latest/meta-data"}, 0.0

    receiver.answer = answer
    sender = HttpPushSender(max_response_bytes=1024)
    try:
        outcome = await sender.send(request(receiver.url), Destinations(["http://127.0.0.1"]))
    finally:
        await sender.stop()
    assert outcome.status == 307
    assert len(receiver.received) == 1


async def test_a_refused_connection_and_a_timeout_are_outcomes_not_errors(receiver: Receiver) -> None:
    receiver.answer = lambda n, r: (200, {}, None)  # never answers
    sender = HttpPushSender()
    rules = Destinations(["http://127.0.0.1"])
    try:
        late = await sender.send(PushRequest(parse_url(receiver.url), b"{}", (), 300), rules)
        refused = await sender.send(request("http://127.0.0.1:9/hook"), rules)
    finally:
        await sender.stop()
    assert late.status is None and late.error == "no answer within 300 ms"
    assert refused.status is None and (refused.error or "").startswith("connection failed")


async def test_an_https_endpoint_is_verified_against_its_name_not_its_address(tmp_path: Path) -> None:
    ca = trustme.CA()
    pem = tmp_path / "hooks.pem"
    ca.issue_cert("hooks.test").private_key_and_cert_chain_pem.write_to_path(str(pem))
    trust = ssl.create_default_context()
    ca.configure_trust(trust)
    receiver = await Receiver().start(certfile=str(pem))
    sender = HttpPushSender(resolver=Rebinding("127.0.0.1"), verify=trust)
    rules = Destinations([f"hooks.test:{receiver.port}", f"other.test:{receiver.port}", "127.0.0.1"])
    try:
        good = await sender.send(request(f"https://hooks.test:{receiver.port}/hook"), rules)
        wrong = await sender.send(request(f"https://other.test:{receiver.port}/hook"), rules)  # same address
        untrusted = await HttpPushSender(resolver=Rebinding("127.0.0.1")).send(
            request(f"https://hooks.test:{receiver.port}/hook"), rules
        )
    finally:
        await sender.stop()
        await receiver.stop()
    assert good.status == 204
    assert wrong.status is None and "certificate" in (wrong.error or "").lower()
    assert untrusted.status is None and "certificate" in (untrusted.error or "").lower()
    assert len(receiver.received) == 1
