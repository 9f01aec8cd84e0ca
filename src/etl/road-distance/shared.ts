// Typed arrays in shared memory: the road pieces' points and search structures are built once
// by the main thread and read by every worker thread without a copy (a SharedArrayBuffer
// passes to a thread by reference).

type Typed = Float64Array | Int32Array | Uint8Array;

/** A zeroed typed array of `n` elements over a SharedArrayBuffer. */
export function sharedArray<T extends Typed>(make: { new (b: SharedArrayBuffer): T; BYTES_PER_ELEMENT: number }, n: number): T {
  return new make(new SharedArrayBuffer(n * make.BYTES_PER_ELEMENT));
}
