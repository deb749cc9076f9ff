"""A listing of more than one page asks for the next page before it reads
the page it has, when the store can say the next token without reading
the page (the engine's ``list_token`` hook): the server makes the next
page while the client reads this one. Against a fake S3 listing on
loopback whose pages say what each test wants: a right guess costs no
request more, a wrong one is dropped and the right page asked for, and a
page that names itself fails instead of being listed for ever."""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import asyncfs
from asyncfs._native import libraries as _libs

FIRST = ""  # the first page's key in Pages.pages: asked for with no token


def _page(keys: list[str], *tokens: str) -> bytes:
    """A ListObjectsV2 answer (encoding-type=url) holding keys, truncated
    when given tokens: each a NextContinuationToken element, as XML text."""
    contents = "".join(
        f"<Contents><Key>{urllib.parse.quote(key, safe='')}</Key><LastModified>2026-12-07T05:00:00.250Z"
        f"</LastModified><ETag>&quot;0&quot;</ETag><Size>{len(key)}</Size></Contents>"
        for key in keys
    )
    more = "".join(f"<NextContinuationToken>{token}</NextContinuationToken>" for token in tokens)
    truncated = "true" if tokens else "false"
    return (
        f"<?xml version='1.0' encoding='UTF-8'?><ListBucketResult><Name>bkt</Name><Prefix>dir%2F</Prefix>"
        f"<IsTruncated>{truncated}</IsTruncated><EncodingType>url</EncodingType>{more}{contents}</ListBucketResult>"
    ).encode()


class Pages:
    """ListObjectsV2 of bucket "bkt" on loopback: pages[token] answers the
    request that carries that continuation token (FIRST: none); asked
    records the tokens of every listing request, in order."""

    def __init__(self) -> None:
        self.pages: dict[str, bytes] = {}
        self.asked: list[str] = []
        pages = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, code: int, body: bytes = b"") -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query, keep_blank_values=True)
                if "list-type" not in query:
                    self._answer(404, b"<Error><Code>NoSuchKey</Code></Error>")
                    return
                token = query.get("continuation-token", [FIRST])[0]
                pages.asked.append(token)
                body = pages.pages.get(token)
                if body is None:
                    self._answer(400, b"<Error><Code>InvalidArgument</Code><Message>no such token</Message></Error>")
                else:
                    self._answer(200, body)

            def do_HEAD(self) -> None:
                self._answer(404)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.fs = asyncfs.Registry().get("s3")
        port = self.server.server_address[1]
        for name, value in {"endpoint": f"http://127.0.0.1:{port}", "region": "us-east-1"}.items():
            self.fs.set_option(name, value.encode())
        self.fs.set_option("anonymous", 1)
        self.fs.set_option("path_style", 1)

    def listing_tokens(self) -> list[str]:
        """The tokens of the listing requests made so far (then forgotten)."""
        asked, self.asked = self.asked, []
        return asked


@pytest.fixture
def pages() -> Iterator[Pages]:
    reason = _libs.unavailable_reason("s3")
    if reason is not None:
        pytest.skip(reason)
    server = Pages()
    yield server
    server.server.shutdown()
    server.server.server_close()


def test_each_page_is_asked_for_once_when_its_token_is_found_ahead(pages: Pages) -> None:
    """Three pages, each next token found before its page is read: three
    requests, each once, in order; every key listed. A token with
    references and a control character (Ceph sends the next key, as
    ``&#x07;``) is found ahead as the page's reading finds it."""
    odd = "k2&#x07;&amp;<"  # as XML text; the token meant is "k2\x07&<"
    pages.pages = {
        FIRST: _page(["dir/a", "dir/b"], "k1"),
        "k1": _page(["dir/c"], odd.replace("<", "&lt;")),
        "k2\x07&<": _page(["dir/d", "dir/e"]),
    }
    assert sorted(pages.fs.get_children("s3://bkt/dir")) == ["a", "b", "c", "d", "e"]
    assert pages.listing_tokens() == [FIRST, "k1", "k2\x07&<"]


def test_a_wrong_guess_is_dropped_and_the_right_page_asked_for(pages: Pages) -> None:
    """A page whose first NextContinuationToken is not the one its reading
    keeps (the last): the page asked for ahead is dropped, the right one
    asked for, and nothing of the wrong one is listed."""
    pages.pages = {
        FIRST: _page(["dir/a"], "wrong", "right"),
        "wrong": _page(["dir/never"]),
        "right": _page(["dir/b"]),
    }
    assert sorted(pages.fs.get_children("s3://bkt/dir")) == ["a", "b"]
    assert pages.listing_tokens() == [FIRST, "wrong", "right"]


def test_a_guess_the_server_refuses_costs_nothing_but_its_request(pages: Pages) -> None:
    pages.pages = {FIRST: _page(["dir/a"], "unknown", "k1"), "k1": _page(["dir/b"])}
    assert sorted(pages.fs.get_children("s3://bkt/dir")) == ["a", "b"]
    assert pages.listing_tokens() == [FIRST, "unknown", "k1"]


def test_a_page_that_names_itself_fails_instead_of_listing_for_ever(pages: Pages) -> None:
    pages.pages = {FIRST: _page(["dir/a"], "k1"), "k1": _page(["dir/b"], "k1")}
    with pytest.raises(asyncfs.DataLossError, match="listed for ever"):
        pages.fs.get_children("s3://bkt/dir")
    assert pages.listing_tokens() == [FIRST, "k1"]


def test_the_last_page_asks_for_nothing_more(pages: Pages) -> None:
    """A page that is not truncated asks for no page ahead, even when it
    names a token."""
    token = b"<NextContinuationToken>x</NextContinuationToken>"
    last = _page(["dir/a"]).replace(b"</IsTruncated>", b"</IsTruncated>" + token)
    pages.pages = {FIRST: last}
    assert pages.fs.get_children("s3://bkt/dir") == ["a"]
    assert pages.listing_tokens() == [FIRST]
