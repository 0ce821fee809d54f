"""Protobuf's wire format, for writing a large message in pieces rather than serialized whole.

A serialized message is its fields one after another, and a parser merges a message field that
occurs more than once and appends to repeated fields: so a model or a GraphDef can be written
as its small part, then each large piece (a weight) under its field's key, streamed.
"""

from __future__ import annotations


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, size: int) -> bytes:
    """The key and length of a length-delimited field (message, bytes, string) of `size`
    bytes: what precedes its contents."""
    return varint(number << 3 | 2) + varint(size)
