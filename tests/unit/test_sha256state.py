"""The resumable SHA-256 (dfd.ingest.sha256state): a state cut at any 64-byte multiple, carried in its portable
form and restored in a fresh context, digests the rest to hashlib's digest; the binding refuses a libcrypto that
fails its self-test."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dfd.ingest import sha256state
from dfd.ingest.sha256state import BLOCK, INITIAL, Sha256, Sha256State, Sha256Unavailable


@settings(max_examples=200, deadline=None)
@given(
    data=st.binary(min_size=0, max_size=BLOCK * 24 + 63),
    cuts=st.lists(st.integers(min_value=0, max_value=24), min_size=0, max_size=5),
    readonly=st.booleans(),
)
def test_a_state_cut_at_random_blocks_resumes_to_hashlibs_digest(data: bytes, cuts: list[int], readonly: bool) -> None:
    offsets = sorted({min(c * BLOCK, len(data) // BLOCK * BLOCK) for c in cuts})
    state, start = INITIAL, 0
    for offset in offsets:
        h = Sha256(state)
        chunk = memoryview(data)[start:offset] if readonly else memoryview(bytearray(data[start:offset]))
        h.update(chunk)
        # the portable form survives a round trip through its stored shape
        state = Sha256State.from_hex(h.state().to_hex(), h.state().length)
        assert state.length == offset
        start = offset
    last = Sha256(state)
    last.update(data[start:])
    assert last.hexdigest() == hashlib.sha256(data).hexdigest()
    assert last.length == len(data)


def test_the_digest_leaves_the_state_as_it_was() -> None:
    h = Sha256()
    h.update(b"a" * BLOCK)
    before = h.state()
    assert h.hexdigest() == hashlib.sha256(b"a" * BLOCK).hexdigest()
    assert h.state() == before
    h.update(b"b" * BLOCK)
    assert h.hexdigest() == hashlib.sha256(b"a" * BLOCK + b"b" * BLOCK).hexdigest()


def test_a_state_is_taken_only_at_a_block_boundary() -> None:
    h = Sha256()
    h.update(b"x" * (BLOCK + 1))
    with pytest.raises(ValueError, match="multiple of 64"):
        h.state()
    with pytest.raises(ValueError, match="multiple of 64"):
        Sha256State(INITIAL.words, 65)
    with pytest.raises(ValueError, match="eight 32-bit words"):
        Sha256State((1 << 32, *INITIAL.words[1:]), 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="64 hex digits"):
        Sha256State.from_hex("00", 0)


def test_the_empty_state_is_fips_initial_value() -> None:
    assert Sha256().state() == INITIAL
    assert Sha256().hexdigest() == hashlib.sha256(b"").hexdigest()


def test_a_count_past_four_gibibits_restores_into_both_words() -> None:
    # a real prefix of 2**29 + 64 bytes (its bit count needs the high word), carried on: hashlib's digest
    zeros = bytes(1 << 24)
    h, expected = Sha256(), hashlib.sha256()
    for chunk in [zeros] * 32 + [bytes(BLOCK)]:
        h.update(chunk)
        expected.update(chunk)
    assert h.state().length == (1 << 29) + BLOCK
    resumed = Sha256(h.state())
    resumed.update(b"tail")
    expected.update(b"tail")
    assert resumed.hexdigest() == expected.hexdigest()


def test_a_libcrypto_that_fails_the_self_test_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sha256state, "_binding", None)
    real = sha256state.Sha256.hexdigest

    def wrong(self: Sha256) -> str:
        return "0" * 64 if self.length else real(self)

    monkeypatch.setattr(sha256state.Sha256, "hexdigest", wrong)
    with pytest.raises(Sha256Unavailable, match=r"SHA-256 (differs|state does not resume)"):
        sha256state.self_test()
    assert sha256state._binding is None  # nothing is bound: every later use tests again, and is refused again
    with pytest.raises(Sha256Unavailable):
        Sha256()


def test_a_process_without_libcrypto_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sha256state, "_binding", None)
    monkeypatch.setattr(sha256state, "_libcrypto_path", lambda: None)
    with pytest.raises(Sha256Unavailable, match="no libcrypto"):
        sha256state.self_test()
