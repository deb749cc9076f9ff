"""TFRecord files, read and written asynchronously, byte for byte as
TensorFlow writes them (the face of :mod:`asyncfs._streams.tfrecord`).

    async with await tfrecord.writer(env, "mem://data/train.tfrecord") as out:
        await out.write(b"example")
    async for record in tfrecord.reader(env, "mem://data/train.tfrecord"):
        ...
"""

from ._streams.tfrecord import (
    TFRecordCorruptionError,
    TFRecordReader,
    TFRecordWriter,
    masked_crc32c,
    reader,
    writer,
)

__all__ = ["TFRecordCorruptionError", "TFRecordReader", "TFRecordWriter", "masked_crc32c", "reader", "writer"]
