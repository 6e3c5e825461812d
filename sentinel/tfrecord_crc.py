"""TFRecord framing's masked CRC32C, shared by the TensorBoard writer and reader.

Its own module so that a reader of scalar event files imports neither TensorBoard, protobuf nor
the store (pyarrow).
"""

from __future__ import annotations

import google_crc32c

MASK_DELTA = 0xA282EAD8


def masked_crc32c(data: bytes) -> int:
    """The masked CRC32C that TFRecord framing stores after a record's length and its data.

    Example:
        >>> hex(masked_crc32c(b""))
        '0xa282ead8'
    """
    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + MASK_DELTA) & 0xFFFFFFFF
