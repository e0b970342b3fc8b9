"""The identity of a cubin's code: what the GPU runs, not how the compiler was invoked.

NVRTC 13 writes the ptxas command line into the cubin (the ``.note.nv.tkinfo`` section), the
compiling process' working directory into its line tables (``-lineinfo``), and the
``--maxrregcount`` cap into each kernel's ``.nv.info`` attributes (``EIATTR_MAXREG_COUNT``), so two
compiles of the same machine code differ byte for byte. ``code_hash`` hashes every section's name,
type, flags and contents, leaving out that note, the debug sections and that cap; the registers a
kernel really uses are in its ``.text`` section's flags, which stay in the hash. Anything that is
not a 64-bit little-endian ELF is hashed whole.
"""

from __future__ import annotations

import hashlib
import struct

TOOL_NOTE = ".note.nv.tkinfo"
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_KPARAM_INFO = 0x17
_EIFMT_NVAL, _EIFMT_BVAL, _EIFMT_HVAL, _EIFMT_SVAL = 1, 2, 3, 4


def sections(blob: bytes) -> list[tuple[str, int, int, bytes]]:
    """(name, type, flags, contents) of every section of a 64-bit little-endian ELF file."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", blob, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    out = []
    for name, kind, flags, _addr, offset, size in headers:
        start = names_at + name
        label = blob[start:blob.index(b"\0", start)].decode(errors="replace")
        body = b"" if kind == 8 else blob[offset:offset + size]   # SHT_NOBITS has no contents
        out.append((label, kind, flags, body))
    return out


def _attributes(info: bytes):
    """(offset, format, attribute, value bytes) of each ``.nv.info`` attribute."""
    i = 0
    while i + 4 <= len(info):
        fmt, attr = info[i], info[i + 1]
        if fmt == _EIFMT_SVAL:
            (size,) = struct.unpack_from("<H", info, i + 2)
            yield i, fmt, attr, info[i + 4:i + 4 + size]
            i += 4 + size
        elif fmt in (_EIFMT_HVAL, _EIFMT_BVAL, _EIFMT_NVAL):
            yield i, fmt, attr, info[i + 2:i + 4]   # a 2-byte slot for the value (or padding)
            i += 4
        else:
            return


def kernel_params(blob: bytes) -> dict[str, list[int]]:
    """The size in bytes of each parameter of each kernel (by its lowered name), in order.

    Read from the ``EIATTR_KPARAM_INFO`` attributes of ``.nv.info.<kernel>``: what the driver itself
    uses to lay out a launch's arguments. A kernel without parameters has an empty list.
    """
    out: dict[str, list[int]] = {}
    for name, _kind, _flags, body in sections(blob):
        if not name.startswith(".nv.info."):
            continue
        sizes: dict[int, int] = {}
        for _at, fmt, attr, value in _attributes(body):
            if fmt == _EIFMT_SVAL and attr == EIATTR_KPARAM_INFO and len(value) >= 12:
                _index, ordinal, _offset, packed = struct.unpack_from("<IHHI", value)
                sizes[ordinal] = (packed >> 18) & 0x3FFF
        out[name.removeprefix(".nv.info.")] = [sizes[k] for k in sorted(sizes)]
    return out


def _without_maxreg(info: bytes) -> bytes:
    """``.nv.info`` attributes with the register cap zeroed (it records the flag, not the code)."""
    out = bytearray(info)
    for at, fmt, attr, _value in _attributes(info):
        if fmt == _EIFMT_HVAL and attr == EIATTR_MAXREG_COUNT:
            out[at + 2:at + 4] = b"\0\0"
    return bytes(out)


def code_hash(blob: bytes) -> str:
    try:
        parts = sections(blob)
    except (ValueError, struct.error, IndexError):
        return hashlib.sha256(blob).hexdigest()
    h = hashlib.sha256()
    for name, kind, flags, body in parts:
        if name == TOOL_NOTE or "debug" in name:
            continue
        if name.startswith(".nv.info"):
            body = _without_maxreg(body)
        h.update(f"{name}\0{kind}\0{flags}\0{len(body)}\0".encode())
        h.update(body)
    return h.hexdigest()
