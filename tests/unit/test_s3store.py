"""dfdlocal.s3store: moto's multipart path without its copies gives moto's results (ETag, checksum, bytes,
errors), and keeps large objects in files."""

from __future__ import annotations

import base64
import hashlib
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dfdlocal import s3store

MIB = 1024 * 1024


def md5(data: bytes) -> Any:
    return hashlib.md5(data, usedforsecurity=False)


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv(s3store.ENVIRONMENT, str(4 * MIB))  # smaller than the objects below, larger than a part
    assert s3store.install()
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends

    s3 = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    name = f"s3store-{os.urandom(4).hex()}"
    s3.create_bucket(name, "us-east-1")
    s3.bucket = name
    yield s3
    for key in list(s3.get_bucket(name).keys):
        s3.delete_object(name, key)
    s3.delete_bucket(name)


def _multipart(s3: Any, key: str, parts: list[bytes], algorithm: str | None) -> Any:
    from requests.structures import CaseInsensitiveDict

    metadata = CaseInsensitiveDict({"x-amz-checksum-algorithm": algorithm} if algorithm else {})
    upload = s3.create_multipart_upload(s3.bucket, key, metadata, None, None, None, None, None)
    for number, body in enumerate(parts, 1):
        s3.upload_part(s3.bucket, upload.id, number, body)
    return upload


def _listed(upload: Any) -> list[tuple[int, str]]:
    return [(number, part.etag) for number, part in sorted(upload.parts.items())]


def _wait_for_spills() -> None:
    for thread in threading.enumerate():
        if thread.name == "dfd-spill":
            thread.join()


PARTS = [os.urandom(5 * MIB), os.urandom(5 * MIB), os.urandom(MIB + 7)]


@pytest.mark.parametrize("algorithm", ["SHA256", None, "CRC32"])
def test_complete_gives_moto_s_etag_checksum_and_bytes(backend: Any, algorithm: str | None) -> None:
    ours = _multipart(backend, "ours", PARTS, algorithm)
    theirs = _multipart(backend, "theirs", PARTS, algorithm)
    value, etag, checksum = ours.complete(iter(_listed(ours)))
    expected_value, expected_etag, expected_checksum = s3store.ORIGINALS["complete"](theirs, iter(_listed(theirs)))
    assert (bytes(value), etag, checksum) == (expected_value, expected_etag, expected_checksum)
    md5s = b"".join(md5(part).digest() for part in PARTS)
    assert etag == f"{md5(md5s).hexdigest()}-3"
    if algorithm == "SHA256":
        composite = hashlib.sha256(b"".join(hashlib.sha256(part).digest() for part in PARTS)).digest()
        assert checksum == ("COMPOSITE", base64.b64encode(composite).decode(), 3)


def test_a_part_s_etag_and_sha256_are_those_of_its_bytes(backend: Any) -> None:
    upload = _multipart(backend, "k", PARTS[:1], "SHA256")
    part = upload.parts[1]
    assert part.etag == f'"{md5(PARTS[0]).hexdigest()}"'
    assert getattr(part, s3store._SHA256) == hashlib.sha256(PARTS[0]).digest()
    assert part.value == PARTS[0]
    assert not hasattr(_multipart(backend, "k2", PARTS[:1], None).parts[1], s3store._SHA256)


def test_a_part_takes_the_digests_the_guard_computed_of_its_very_bytes(backend: Any) -> None:
    from requests.structures import CaseInsensitiveDict

    from dfdlocal.s3auth import RECEIVED

    body = os.urandom(MIB)
    upload = backend.create_multipart_upload(
        backend.bucket, "k", CaseInsensitiveDict({"x-amz-checksum-algorithm": "SHA256"}), *[None] * 5
    )
    RECEIVED.body, RECEIVED.sha256, RECEIVED.md5 = body, b"guard's sha256", "guard's md5"
    try:
        backend.upload_part(backend.bucket, upload.id, 1, body)  # these bytes: the guard's digests
        backend.upload_part(backend.bucket, upload.id, 2, bytes(bytearray(body)))  # equal bytes: its own
    finally:
        RECEIVED.body = None
    assert (upload.parts[1].etag, getattr(upload.parts[1], s3store._SHA256)) == ('"guard\'s md5"', b"guard's sha256")
    assert upload.parts[2].etag == f'"{md5(body).hexdigest()}"'
    assert getattr(upload.parts[2], s3store._SHA256) == hashlib.sha256(body).digest()
    assert upload.parts[1].value == upload.parts[2].value == body


def test_complete_refuses_what_moto_refuses(backend: Any) -> None:
    from moto.s3.exceptions import EntityTooSmall, InvalidPart, MalformedXML

    upload = _multipart(backend, "k", [b"small", *PARTS], "SHA256")
    listed = _listed(upload)
    cases: list[tuple[list[tuple[int, str]], type[Exception]]] = [
        ([(1, listed[1][1])], InvalidPart),  # another part's ETag
        ([(9, listed[1][1])], InvalidPart),  # no such part
        ([listed[0], listed[1]], EntityTooSmall),  # a part under 5 MiB that is not the last
        ([], MalformedXML),
    ]
    for body, error in cases:
        with pytest.raises(error):
            upload.complete(iter(body))
        with pytest.raises(error):
            s3store.ORIGINALS["complete"](upload, iter(body))
    value, _, _ = upload.complete(iter(listed[1:]))
    assert bytes(value) == b"".join(PARTS)


def test_a_completed_object_larger_than_the_buffer_moves_to_a_file(backend: Any) -> None:
    upload = _multipart(backend, "big", PARTS, "SHA256")
    key = backend.complete_multipart_upload(backend.bucket, upload.id, iter(_listed(upload)))
    _wait_for_spills()
    assert key._value_buffer._rolled
    assert key.value == b"".join(PARTS)
    stored = backend.get_object(backend.bucket, "big")
    assert stored.etag == key.etag and stored.checksum_value == key.checksum_value
    assert all(part.disposed for part in upload.parts.values())  # moto frees the parts on completion


def test_a_value_larger_than_the_buffer_moves_to_its_file(backend: Any) -> None:
    small, large = os.urandom(MIB), os.urandom(5 * MIB)
    backend.put_object(backend.bucket, "small", small)
    backend.put_object(backend.bucket, "large", large)
    _wait_for_spills()
    assert not backend.get_object(backend.bucket, "small")._value_buffer._rolled
    stored = backend.get_object(backend.bucket, "large")
    assert stored._value_buffer._rolled
    assert stored.value == large and stored.etag == f'"{md5(large).hexdigest()}"'


def test_a_large_value_s_etag_is_known_before_it_moves_to_its_file(
    backend: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """moto reads a new key's ETag at once (PutObject's answer, CopyObject) without the key's lock: during the move
    to the file it could hash a half-written file and keep that MD5. So the ETag is taken from the bytes in memory
    before the move starts."""
    known: list[str | None] = []
    start = s3store._start_spill
    monkeypatch.setattr(s3store, "_start_spill", lambda key: known.append(key._etag) or start(key))
    large = os.urandom(5 * MIB)
    key = backend.put_object(backend.bucket, "racing", large)
    backend.copy_object(key, backend.bucket, "copied")
    assert known == [md5(large).hexdigest()] * 2  # the put and the copy, each known before its move
    _wait_for_spills()
    assert backend.get_object(backend.bucket, "copied").etag == key.etag == f'"{md5(large).hexdigest()}"'


@pytest.mark.parametrize("size", [MIB, 5 * MIB])  # in memory; over the buffer, moving to its file
@pytest.mark.parametrize("change", ["overwrite", "delete", "copy over"])
def test_a_reader_holding_a_key_replaced_or_deleted_under_it_reads_its_bytes(
    backend: Any, size: int, change: str
) -> None:
    """A GetObject (or a CopyObject's source) resolves its key, then reads its bytes: a write meanwhile leaves
    it the bytes it resolved (moto's own dispose closes the key's file: a 500, ``seek of closed file``)."""
    old, new = os.urandom(size), os.urandom(size)
    backend.put_object(backend.bucket, "k", old)
    held = backend.get_object(backend.bucket, "k")
    if change == "overwrite":
        backend.put_object(backend.bucket, "k", new)
    elif change == "delete":
        backend.delete_object(backend.bucket, "k")
    else:
        backend.put_object(backend.bucket, "other", new)
        backend.copy_object(backend.get_object(backend.bucket, "other"), backend.bucket, "k")
    assert held.disposed
    assert held.value == old
    backend.copy_object(held, backend.bucket, "copy of the held")
    assert backend.get_object(backend.bucket, "copy of the held").value == old
    _wait_for_spills()
    assert held.value == old


def test_a_key_no_one_holds_is_freed_and_its_file_closed(backend: Any) -> None:
    """moto keeps every key it creates (FakeKey.instances_tracked): here a key's bytes are freed when the key is."""
    import gc
    import weakref

    backend.put_object(backend.bucket, "k", os.urandom(5 * MIB))
    _wait_for_spills()
    replaced = backend.get_object(backend.bucket, "k")
    buffer, alive = replaced._value_buffer, weakref.ref(replaced)
    backend.put_object(backend.bucket, "k", b"new")
    del replaced
    gc.collect()
    assert alive() is None
    assert buffer.closed


def test_a_large_key_read_back_from_its_file_at_a_start_moves_to_a_file_again(backend: Any, tmp_path: Path) -> None:
    from dfdlocal import persist

    large = os.urandom(5 * MIB)
    backend.put_object(backend.bucket, "big", large)
    _wait_for_spills()
    persist.PersistS3(lambda environ, start: [], tmp_path).sync_key(backend.get_bucket(backend.bucket), "big")
    backend.delete_object(backend.bucket, "big")
    assert persist.restore_s3(tmp_path).objects == 1
    _wait_for_spills()
    restored = backend.get_object(backend.bucket, "big")
    assert restored._value_buffer._rolled  # not held in memory for the rest of the run
    assert restored.value == large


def test_moto_s_module_listing_is_taken_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's dispatcher asks for it on every request; the emulator lists the package once."""
    from moto import backends

    from dfdlocal import emulator

    monkeypatch.setattr(backends, "list_of_moto_modules", backends.list_of_moto_modules)
    listed = list(backends.list_of_moto_modules())
    emulator._cache_module_listing()
    calls: list[str] = []
    monkeypatch.setattr(os, "listdir", lambda path: calls.append(str(path)) or [])
    assert list(backends.list_of_moto_modules()) == listed and "s3" in listed
    assert not calls
