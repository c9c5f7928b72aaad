"""The push allow-list and address rules: which URLs and which addresses a push may use."""

from __future__ import annotations

import ipaddress
import re

import pytest

from service.core.push.destinations import DestinationRefused, Destinations, parse_url

OPEN = Destinations(["*.example.com", "hooks.example.org:8443", "http://10.1.2.3:8080", "192.168.0.0/16"])


@pytest.mark.parametrize(
    "url",
    [
        "https://a.example.com/x",
        "https://a.b.example.com:444/x?y=1",
        "https://HOOKS.example.org:8443/",
        "http://10.1.2.3:8080/h",
        "https://192.168.7.7/h",
    ],
)
def test_allowed_urls(url: str) -> None:
    OPEN.check_url(url)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("https://example.com/x", "not in the gateway's allowed destinations"),  # names under it only
        ("http://a.example.com/x", "not in the gateway's allowed destinations"),  # http: an http:// entry
        ("https://hooks.example.org/", "not in the gateway's allowed destinations"),  # the entry's port only
        ("https://10.1.2.3:8080/h", "not in the gateway's allowed destinations"),
        ("http://10.1.2.4:8080/h", "not in the gateway's allowed destinations"),
        ("https://user:pw@a.example.com/", "no user or password"),
        ("gopher://a.example.com/", "scheme is http or https"),
        ("https://a.example.com:99999/", "not a valid URL"),
        ("https:///nohost", "names a host"),
        ("https://a.example.com/\n", "printable ASCII"),
        ("https://exämple.com/", "printable ASCII"),
        ("https://[fe80::1%25eth0]/", "names a host"),
    ],
)
def test_refused_urls(url: str, why: str) -> None:
    with pytest.raises(DestinationRefused, match=why):
        OPEN.check_url(url)


def test_an_empty_allow_list_allows_nothing() -> None:
    with pytest.raises(DestinationRefused, match="Push is off"):
        Destinations([]).check_url("https://a.example.com/")
    assert not Destinations([]).enabled


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.1",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # the metadata services
        "100.100.100.200",  # shared address space, Alibaba's metadata
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00:ec2::254",
        "::ffff:127.0.0.1",  # loopback in an IPv6 dress
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2002:a00:1::",  # 6to4 of 10.0.0.1
    ],
)
def test_addresses_that_are_not_global_are_refused_unless_named(address: str) -> None:
    target = parse_url("https://a.example.com/")
    with pytest.raises(DestinationRefused, match="do not name"):
        Destinations(["*.example.com"]).check_address(target, ipaddress.ip_address(address))


def test_an_address_an_entry_names_may_be_used() -> None:
    target = parse_url("https://a.example.com/")
    OPEN.check_address(target, ipaddress.ip_address("192.168.3.4"))  # in 192.168.0.0/16
    OPEN.check_address(target, ipaddress.ip_address("93.184.216.34"))  # global
    with pytest.raises(DestinationRefused):  # 10.1.2.3 is named for port 8080 only
        OPEN.check_address(target, ipaddress.ip_address("10.1.2.3"))


def test_the_first_allowed_address_is_the_one_used() -> None:
    target = parse_url("https://a.example.com/")
    addresses = [ipaddress.ip_address(a) for a in ("127.0.0.1", "93.184.216.34", "8.8.8.8")]
    assert str(OPEN.first_allowed(target, addresses)) == "93.184.216.34"
    with pytest.raises(DestinationRefused, match=r"127\.0\.0\.1"):
        OPEN.first_allowed(target, addresses[:1])


@pytest.mark.parametrize("entry", ["*", "*.", "a..b", "ftp://x", "10.0.0.0/33", "x:0", "x:70000", "[::1]x"])
def test_bad_entries_are_refused_by_name(entry: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(entry))):
        Destinations([entry])


def test_a_host_header_names_the_port_only_when_it_is_not_the_schemes() -> None:
    assert parse_url("https://a.example.com/").authority == "a.example.com"
    assert parse_url("https://a.example.com:8443/").authority == "a.example.com:8443"
    assert parse_url("http://[::1]:8080/").authority == "[::1]:8080"
