"""SHA-256 that stops and resumes across processes: the running state in a portable form (the eight 32-bit chaining
words and the byte count, taken only at a multiple of the 64-byte block, where no buffered input remains),
restored into OpenSSL's ``SHA256_CTX`` through ctypes on the libcrypto CPython's ``_hashlib`` already loads
(docs/design/segments.md). The binding proves itself against hashlib at first use: a libcrypto whose context does
not restore to hashlib's digests is refused (Sha256Unavailable), never used."""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import threading
from dataclasses import dataclass

BLOCK = 64  # SHA-256's block: a state is cut only at a multiple of it
MASK32 = 0xFFFFFFFF
# the most bytes SHA-256 takes (a 64-bit bit count)
MAX_LENGTH = (1 << 61) - 1


class Sha256Unavailable(RuntimeError):
    """The process's libcrypto cannot be bound, or it failed the known-answer self-test: resumable hashing is
    refused."""


@dataclass(frozen=True)
class Sha256State:
    """SHA-256 after `length` bytes (a multiple of 64): the chaining words h0..h7."""

    words: tuple[int, int, int, int, int, int, int, int]
    length: int

    def __post_init__(self) -> None:
        if len(self.words) != 8 or any(not 0 <= w <= MASK32 for w in self.words):
            raise ValueError("a SHA-256 state is eight 32-bit words")
        if self.length < 0 or self.length % BLOCK or self.length > MAX_LENGTH:
            raise ValueError(f"a SHA-256 state is cut at a multiple of {BLOCK} bytes, got {self.length}")

    def to_hex(self) -> str:
        """The words as 64 hex digits (h0 first, big-endian), the form the state item stores."""
        return "".join(f"{w:08x}" for w in self.words)

    @classmethod
    def from_hex(cls, words: str, length: int) -> Sha256State:
        if len(words) != 64:
            raise ValueError("a SHA-256 state is 64 hex digits")
        parsed = tuple(int(words[i : i + 8], 16) for i in range(0, 64, 8))
        return cls(parsed, length)  # type: ignore[arg-type]


# FIPS 180-4's initial hash value: the state of zero bytes
INITIAL = Sha256State(
    (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19), 0
)


class _Ctx(ctypes.Structure):
    # OpenSSL's SHA256state_st (openssl/sha.h), the same in 1.1 and 3.x and on every architecture: SHA_LONG is 32 bits
    _fields_ = [
        ("h", ctypes.c_uint32 * 8),
        ("Nl", ctypes.c_uint32),
        ("Nh", ctypes.c_uint32),
        ("data", ctypes.c_uint32 * 16),
        ("num", ctypes.c_uint),
        ("md_len", ctypes.c_uint),
    ]


def _libcrypto_path() -> str | None:
    """The libcrypto this process has mapped (the one _hashlib links), else the system's."""
    import _hashlib  # noqa: F401  (maps the libcrypto hashlib uses)

    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            for line in maps:
                path = line.split()[-1] if line.strip() else ""
                if "/libcrypto" in path:
                    return path
    except OSError:
        pass
    return ctypes.util.find_library("crypto")


class _Binding:
    def __init__(self) -> None:
        path = _libcrypto_path()
        if path is None:
            raise Sha256Unavailable("no libcrypto in this process")
        try:
            # CDLL: each call releases the GIL (a segment's hashing leaves its reader threads running)
            lib = ctypes.CDLL(path)
            self.init = lib.SHA256_Init
            self.update = lib.SHA256_Update
            self.final = lib.SHA256_Final
        except (OSError, AttributeError) as exc:
            raise Sha256Unavailable(f"libcrypto at {path} has no SHA256_Init/Update/Final: {exc}") from exc
        self.init.argtypes = [ctypes.POINTER(_Ctx)]
        self.update.argtypes = [ctypes.POINTER(_Ctx), ctypes.c_void_p, ctypes.c_size_t]
        self.final.argtypes = [ctypes.c_char_p, ctypes.POINTER(_Ctx)]
        for fn in (self.init, self.update, self.final):
            fn.restype = ctypes.c_int


_lock = threading.Lock()
_binding: _Binding | None = None


def _bound() -> _Binding:
    """The binding, self-tested once per process."""
    global _binding
    if _binding is None:
        with _lock:
            if _binding is None:
                binding = _Binding()
                _self_test(binding)
                _binding = binding
    return _binding


class Sha256:
    """A SHA-256 in progress that resumes from a Sha256State and yields one at any 64-byte multiple."""

    def __init__(self, state: Sha256State = INITIAL, *, binding: _Binding | None = None) -> None:
        self._b = binding or _bound()
        self._ctx = _Ctx()
        if self._b.init(ctypes.byref(self._ctx)) != 1:
            raise Sha256Unavailable("SHA256_Init failed")
        for i, word in enumerate(state.words):
            self._ctx.h[i] = word
        bits = state.length * 8
        self._ctx.Nl, self._ctx.Nh = bits & MASK32, bits >> 32
        self._ctx.num = 0
        self.length = state.length

    def update(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data).cast("B")
        if not view.nbytes:
            return
        keep: bytes | None = None
        if view.readonly:
            # bytes (or a whole view of them) are read in place; another read-only buffer is copied first
            obj = view.obj
            if isinstance(data, bytes):
                keep = data
            elif isinstance(obj, bytes) and len(obj) == view.nbytes:
                keep = obj
            else:
                keep = view.tobytes()
            ptr = ctypes.cast(ctypes.c_char_p(keep), ctypes.c_void_p)
        else:
            ptr = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(view)))
        if self._b.update(ctypes.byref(self._ctx), ptr, view.nbytes) != 1:
            raise Sha256Unavailable("SHA256_Update failed")
        self.length += view.nbytes

    def state(self) -> Sha256State:
        """The state after every byte fed; only at a multiple of 64 bytes (ValueError otherwise)."""
        if self.length % BLOCK:
            raise ValueError(f"the state is taken at a multiple of {BLOCK} bytes, not at {self.length}")
        return Sha256State(tuple(self._ctx.h), self.length)

    def hexdigest(self) -> str:
        """The digest of every byte fed (this object keeps its state: the final padding runs on a copy)."""
        ctx = _Ctx()
        ctypes.memmove(ctypes.byref(ctx), ctypes.byref(self._ctx), ctypes.sizeof(_Ctx))
        out = ctypes.create_string_buffer(32)
        if self._b.final(out, ctypes.byref(ctx)) != 1:
            raise Sha256Unavailable("SHA256_Final failed")
        return out.raw.hex()


def _self_test(binding: _Binding) -> None:
    """Known answers against hashlib: a state taken at each cut and restored into a fresh context digests the
    rest to hashlib's digest (lengths around the block and the 32-bit bit-count boundary of the low word)."""
    data = bytes((i * 131 + 7) % 251 for i in range(BLOCK * 40 + 37))
    for cut in (0, BLOCK, BLOCK * 3, BLOCK * 40):
        first = Sha256(binding=binding)
        first.update(data[:cut])
        if first.hexdigest() != hashlib.sha256(data[:cut]).hexdigest():
            raise Sha256Unavailable(f"libcrypto's SHA-256 differs from hashlib's ({cut} bytes)")
        for end in (cut, cut + 1, cut + 55, cut + 56, cut + 64, len(data)):
            second = Sha256(first.state(), binding=binding)
            second.update(data[cut:end])
            if second.hexdigest() != hashlib.sha256(data[:end]).hexdigest():
                raise Sha256Unavailable(f"libcrypto's SHA-256 state does not resume (cut {cut}, end {end})")
    # a count past 2**32 bits restores into both words of the context's bit count
    probe = Sha256(Sha256State(INITIAL.words, 1 << 30), binding=binding)
    if (probe._ctx.Nl, probe._ctx.Nh) != (0, 2):
        raise Sha256Unavailable("libcrypto's SHA-256 bit count does not restore")


def self_test() -> None:
    """Bind and self-test now (a cold start calls it): raises Sha256Unavailable when refused."""
    _bound()
