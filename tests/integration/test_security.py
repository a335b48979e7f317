"""Nothing leaked: planted credentials appear in no output file or log of a real run; the simulator
and the RAG service listen on loopback only; TLS certificates are verified unless ``--insecure``.

(HTML reports escaping model output are the reports' tests.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import socket
import ssl
import subprocess
from pathlib import Path

import psutil
import pytest

from fourfold.client.dialects import RequestOptions, get_dialect
from fourfold.client.factory import make_http_client
from fourfold.client.stream import send
from fourfold.levels.base import make_client
from fourfold.levels.options import Settings, redacted
from fourfold.measure.record import RequestRecord
from fourfold.rundir.runlog import RunWriter
from fourfold.rundir.secrets import MIN_CHARS, Secrets, credential_forms, for_request
from fourfold.targets.launch import start_simulator
from fourfold.targets.sim.cli import build_parser
from fourfold.workloads.items import Item
from tests.conftest import LOCUST, locust_env, only_run_dir, read_jsonl
from tests.faulty_server import FaultyServer

pytestmark = pytest.mark.integration

CLI_KEY = "sk-test-PLANTED-cli-4f9a1c2e7b"
ENV_KEY = "sk-test-PLANTED-env-8d3e5a0f6c"
HEADER_TOKEN = "PLANTED-hdr-Zq81xW0pLm"
OTHER_HEADER_KEY = "PLANTED-xkey-Jr55TtQa90"
SECRETS = (CLI_KEY, ENV_KEY, HEADER_TOKEN, OTHER_HEADER_KEY, "PLANTED")
ITEM = Item(id="q", messages=({"role": "user", "content": "hi"},))


def test_planted_credentials_appear_in_no_output_file_and_no_log(tmp_path, locustfile):
    server = FaultyServer(faults=("ok", "echo_auth", "http_500", "malformed_json"))
    env = {**locust_env(), "FOURFOLD_API_KEY": ENV_KEY}
    try:
        proc = subprocess.run(
            [*LOCUST, "-f", locustfile("l1_throughput.py"), "--headless", "-u", "2", "-r", "2", "-t", "4s",
             "--host", server.url, "--metrics-url", "off", "--api-key", CLI_KEY,
             "--header", f"Authorization: Bearer {HEADER_TOKEN}",
             "--header", f"X-Api-Key: {OTHER_HEADER_KEY}",
             "--csv", str(tmp_path / "loc"), "--csv-full-history", "--html", str(tmp_path / "report.html"),
             "--logfile", str(tmp_path / "locust.log"), "--loglevel", "DEBUG",
             "--json-file", str(tmp_path / "stats")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=90, check=False)
    finally:
        server.stop()
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    records = read_jsonl(only_run_dir(tmp_path) / "records.jsonl")
    echoed = [r for r in records if "***" in r["error_detail"] or "***" in r["text"]]
    assert echoed, "the echoing server was not met: the test proves nothing"   # the scrub did work
    outputs = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {p.suffix for p in outputs} >= {".json", ".jsonl", ".csv", ".html", ".log"}, outputs
    for path in outputs:
        text = path.read_bytes().decode("utf-8", "replace")
        for secret in SECRETS:
            assert secret not in text, f"{secret} leaked into {path.relative_to(tmp_path)}"
    for stream_name, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        for secret in SECRETS:
            assert secret not in text, f"{secret} leaked into {stream_name}"


def _listening(pid: int) -> list[tuple[str, int]]:
    return [(c.laddr.ip, c.laddr.port) for c in psutil.Process(pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN]


def test_the_simulator_and_the_rag_service_listen_on_loopback_only_by_default():
    from fourfold.targets.rag.cli import build_parser as rag_parser
    from fourfold.targets.rag.launch import start_rag_service

    assert build_parser().parse_args([]).host == "127.0.0.1"
    assert rag_parser().parse_args([]).host == "127.0.0.1"
    with start_simulator("flat") as sim, start_rag_service(sim.url) as rag:
        assert sim.url.startswith("http://127.0.0.1:") and rag.url.startswith("http://127.0.0.1:")
        assert _listening(sim.process.pid) == [("127.0.0.1", sim.port)]
        assert _listening(rag.process.pid) == [("127.0.0.1", rag.port)]


# ---- TLS ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def self_signed(tmp_path_factory) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by nobody, made now with the openssl command."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a self-signed certificate")
    where = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
                    "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


class TLSFaultyServer(FaultyServer):
    """FaultyServer behind TLS (its "ok" stream)."""

    def __init__(self, cert: Path, key: Path) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._context.load_cert_chain(cert, key)
        super().__init__(faults=("ok",))

    def get_request(self) -> tuple[socket.socket, object]:
        sock, address = super().get_request()
        return self._context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request, client_address) -> None:  # noqa: ANN001 - socketserver's signature
        try:
            request.do_handshake()
        except (ssl.SSLError, OSError):
            return                       # the client refused our certificate: nothing to serve
        super().finish_request(request, client_address)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server_address[1]}"


@pytest.mark.parametrize("http2", [False, True], ids=["raw-h1", "httpx-h2"])
def test_tls_is_verified_unless_insecure(self_signed, http2):
    server = TLSFaultyServer(*self_signed)
    dialect = get_dialect("openai")
    try:
        outcomes = {}
        for insecure in (False, True):
            client = make_client(Settings(insecure=insecure, http2=http2, connect_timeout_s=5,
                                          read_timeout_s=5), server.url)
            outcomes[insecure] = send(client, dialect, dialect.build(ITEM, RequestOptions()), RequestRecord())
            client.close()
    finally:
        server.stop()
    refused, accepted = outcomes[False], outcomes[True]
    assert (refused.error_class == "connect_error"
            and "CERTIFICATE_VERIFY_FAILED" in refused.error_detail.upper())
    assert accepted.error_class == "ok" and accepted.text == "Hello world", accepted.error_detail


def test_secret_headers_are_scrubbed_from_what_an_echoing_server_sends_back():
    server = FaultyServer(faults=("echo_auth",))
    dialect = get_dialect("openai")
    try:
        client = make_client(Settings(api_key=CLI_KEY), server.url)
        records = [send(client, dialect, dialect.build(ITEM, RequestOptions()), RequestRecord())
                   for _ in range(2)]
        client.close()
    finally:
        server.stop()
    rejected, reflected = records
    assert rejected.error_class == "http_4xx" and "invalid credentials: Bearer *** " in rejected.error_detail
    assert reflected.error_class == "ok" and reflected.text == "you sent Bearer *** "
    assert all(CLI_KEY not in r.to_json() for r in records)



# ---- the redaction rule (fourfold.rundir.secrets) ------------------------------------------------------
KEY = "sk-live-PLANTED-0a1b2c3d4e5f"
SUB = "ocp-PLANTED-9z8y7x6w5v4u"


@pytest.mark.parametrize(("text", "expected"), [
    (f"key={KEY}", "key=***"),
    (f"{KEY}{KEY} and {KEY}", "****** and ***"),
    (f"quoted: '{KEY[:20]}'", "quoted: '***'"),              # a cut that kept 20 characters of it
    (f"cut at the end: {KEY[:MIN_CHARS]}", "cut at the end: ***"),
    # too little to tell
    (f"five characters: {KEY[:MIN_CHARS - 1]}", f"five characters: {KEY[:MIN_CHARS - 1]}"),
    ("nothing to see", "nothing to see"),
    (f"{SUB[:10]}...{SUB}", "***...***"),
])
def test_scrub_replaces_every_secret_and_what_a_cut_left_of_one(text, expected):
    assert Secrets([KEY, SUB]).scrub(text) == expected


@pytest.mark.parametrize(("detail", "expected"), [
    (f"bad chunk size b'zz{KEY[:3]}'", "bad chunk size b'zz***'"),  # an excerpt cut 3-5 characters in
    (f"not JSON: '{{\"x\": \"{KEY[:5]}' (+2 more malformed)",
     "not JSON: '{\"x\": \"***' (+2 more malformed)"),
    (f"{KEY[:5]} in running text", f"{KEY[:5]} in running text"),   # not at a cut: too short to tell
    (f"b'{KEY[:2]}'", f"b'{KEY[:2]}'"),
])
def test_what_a_quoted_excerpt_cut_left_of_a_key_is_removed_from_the_error_detail(detail, expected):
    record = RequestRecord(error_detail=detail)
    assert Secrets([KEY]).scrub_record(record).error_detail == expected


def test_credential_forms_keep_the_scheme_and_cover_encoded_and_decoded_values():
    assert credential_forms(f"Bearer {KEY}") == [KEY] * 5
    assert Secrets(credential_forms(f"Bearer {KEY}")).scrub(f"Authorization: Bearer {KEY}") == \
        "Authorization: Bearer ***"
    basic = Secrets(credential_forms("Basic dXNlcjpwYXNzd29yZDEyMw=="))        # user:password123
    assert basic.scrub("dXNlcjpwYXNzd29yZDEyMw== user:password123 password123") == "*** *** ***"
    url = Secrets(credential_forms("abc+def/ghi=jk"))
    assert url.scrub("q=abc%2Bdef%2Fghi%3Djk&r=abc+def/ghi=jk") == "q=***&r=***"
    assert Secrets(["on", "v2", "12345"]).values == ()          # short values would blank ordinary words
    assert repr(Secrets([KEY])) == "Secrets(1 values)"          # a log line never shows one


def test_scrub_record_walks_every_string_field_and_nested_key():
    record = RequestRecord()
    planted = f"<{KEY}>"
    for name, value in record.to_dict().items():
        if isinstance(value, str):
            setattr(record, name, planted)
    record.plan = {KEY: [planted, {"deep": (planted, 1)}], "n": 1}
    record.server_timing = {KEY: 1.5}
    deep: list = [planted]
    for _ in range(5000):            # deeper than the recursion limit: the walk is iterative
        deep = [deep]
    record.extra = {"deep": deep, "content_type": planted}
    Secrets([KEY]).scrub_record(record)
    record.extra.pop("deep")
    line = record.to_json()
    assert KEY[:MIN_CHARS] not in line
    assert record.text == record.error_detail == record.finish_reason == record.endpoint == "<***>"
    assert (record.plan == {"***": ["<***>", {"deep": ["<***>", 1]}], "n": 1}
            and record.server_timing == {"***": 1.5})


def test_every_header_value_is_a_secret_unless_public_and_meta_json_shows_none(tmp_path, monkeypatch):
    monkeypatch.setenv("FOURFOLD_API_KEY", KEY)
    options = argparse.Namespace(api_key="", headers=[f"Ocp-Apim-Subscription-Key: {SUB}"],
                                 public_headers=["X-Trace: trace-1234-public"], label=f"run-{SUB}")
    settings = Settings.from_options(options)
    assert settings.request_headers() == {"X-Trace": "trace-1234-public", "Ocp-Apim-Subscription-Key": SUB,
                                          "Authorization": f"Bearer {KEY}"}
    assert set(settings.secrets().values) == {KEY, SUB}
    shown = repr(dataclasses.replace(settings, label=""))      # a Settings in a log line shows no credential
    assert KEY not in shown and SUB not in shown
    meta = redacted(settings)
    assert meta["api_key"] == "***" and meta["headers"] == [["Ocp-Apim-Subscription-Key", "***"]]
    assert meta["public_headers"] == [["X-Trace", "trace-1234-public"]] and meta["label"] == "run-***"
    writer = RunWriter("meta", base_dir=tmp_path)
    writer.write_meta({"settings": meta, "target": f"https://llm.example/{SUB}/v1", "argv": ["-H", SUB]})
    writer.close()
    text = (writer.run_dir / "meta.json").read_text()
    assert KEY not in text and SUB not in text and "trace-1234-public" in text
    assert json.loads(text)["target"] == "https://llm.example/***/v1"


def test_a_client_built_without_make_client_still_scrubs_the_configured_credentials():
    """L2's gateway users build their own httpx client: the process's configured secrets apply."""
    from tests.hostile import harness as h

    settings = Settings(headers=(("Ocp-Apim-Subscription-Key", SUB),), read_timeout_s=5, connect_timeout_s=5,
                        public_headers=(("X-Debug-Token", "public-debug-value"),))   # a secret-looking name
    settings.secrets()
    dialect = get_dialect("openai")
    with h.HostileServer("tests.hostile.test_secrets:echo") as server:
        client = make_http_client(server.url, headers=settings.request_headers())
        assert SUB in for_request(client).values and "public-debug-value" not in for_request(client).values
        request = dialect.build(ITEM, RequestOptions())
        request.headers["X-Case"] = "error_512"
        record = send(client, dialect, request, RequestRecord())
        client.close()
    assert (record.status == 401 and SUB[:MIN_CHARS] not in record.to_json()
            and record.error_detail.endswith("*** and ***"))
