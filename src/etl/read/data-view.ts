// A DataView of a reader's buffer, cached by buffer (the readers reuse their buffers from
// record to record; two slots: the .dbf's and the .shp's): V8 compiles its getFloat64 /
// getUint32 inline, where Buffer's readDoubleLE & co. are a call each.
let bufA: Buffer | null = null, bufB: Buffer | null = null;
let viewA: DataView<ArrayBufferLike> = new DataView(new ArrayBuffer(0));
let viewB = viewA;

export function dataView(buf: Buffer): DataView<ArrayBufferLike> {
  if (bufA === buf) return viewA;
  if (bufB === buf) return viewB;
  // The slot used longest ago goes: B moves to A's place.
  bufB = bufA;
  viewB = viewA;
  bufA = buf;
  viewA = new DataView(buf.buffer, buf.byteOffset, buf.length);
  return viewA;
}
