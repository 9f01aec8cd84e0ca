// A static packed R-tree over boxes (sort-tile-recursive leaves, 16 to a node) with a
// best-first walk: nodes are opened in the order of a lower bound the caller computes from
// their box, and the walk stops when the smallest bound left exceeds the caller's cut-off.
// The nearest-road search walks it once per property, and again for a property farther than
// 600 km from every road (nearest.ts, REACH_M). The tree is packed once
// (packBoxTree) into shared memory; each thread wraps it (BoxTree) with a heap of its own.
import { sharedArray } from './shared.ts';

const NODE = 16;

export type BoxBound = (x0: number, x1: number, y0: number, y1: number) => number;

/** A packed tree: what packBoxTree builds once and every thread's BoxTree reads. */
export interface PackedBoxTree {
  /** 4 per node (min x, max x, min y, max y); the first `count` nodes are the items */
  boxes: Float64Array;
  /** per node: the item id (items) or the first child's node index (inner nodes) */
  ref: Int32Array;
  /** per node: how many children (0 for an item) */
  children: Uint8Array;
  /** items */
  count: number;
  /** the root's node index, -1 without items */
  root: number;
}

/** Packs the items' `boxes` (4 per item: min x, max x, min y, max y) into a tree in shared memory. */
export function packBoxTree(boxes: Float64Array): PackedBoxTree {
  const n = boxes.length / 4;
  let total = n;
  for (let level = n; level > 1; ) {
    level = Math.ceil(level / NODE);
    total += level;
  }
  const t: PackedBoxTree = { boxes: sharedArray(Float64Array, total * 4), ref: sharedArray(Int32Array, total), children: sharedArray(Uint8Array, total), count: n, root: -1 };
  // leaves in sort-tile-recursive order: slices by x, then by y within a slice
  const cx = (i: number) => boxes[4 * i] + boxes[4 * i + 1];
  const cy = (i: number) => boxes[4 * i + 2] + boxes[4 * i + 3];
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => cx(a) - cx(b));
  const slice = Math.ceil(Math.sqrt(Math.ceil(n / NODE))) * NODE;
  for (let s = 0; s < n; s += slice) {
    const part = order.slice(s, s + slice).sort((a, b) => cy(a) - cy(b));
    for (let k = 0; k < part.length; k++) order[s + k] = part[k];
  }
  order.forEach((item, pos) => {
    t.boxes.set(boxes.subarray(4 * item, 4 * item + 4), 4 * pos);
    t.ref[pos] = item;
  });
  // each level groups NODE consecutive nodes of the one below
  let from = 0;
  let size = n;
  let next = n;
  while (size > 1) {
    const levelStart = next;
    for (let c = from; c < from + size; c += NODE) {
      const k = Math.min(NODE, from + size - c);
      let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
      for (let j = c; j < c + k; j++) {
        x0 = Math.min(x0, t.boxes[4 * j]);
        x1 = Math.max(x1, t.boxes[4 * j + 1]);
        y0 = Math.min(y0, t.boxes[4 * j + 2]);
        y1 = Math.max(y1, t.boxes[4 * j + 3]);
      }
      t.boxes.set([x0, x1, y0, y1], 4 * next);
      t.ref[next] = c;
      t.children[next] = k;
      next++;
    }
    from = levelStart;
    size = next - levelStart;
  }
  t.root = n === 0 ? -1 : next - 1;
  return t;
}

export class BoxTree {
  private readonly boxes: Float64Array;
  private readonly ref: Int32Array;
  private readonly children: Uint8Array;
  private readonly root: number;
  readonly count: number;
  private heapNodes = new Int32Array(256);
  private heapKeys = new Float64Array(256);

  constructor(packed: PackedBoxTree) {
    ({ boxes: this.boxes, ref: this.ref, children: this.children, root: this.root, count: this.count } = packed);
    const total = this.ref.length;
    if (this.boxes.length !== 4 * total || this.children.length !== total || this.root >= total || (this.count > 0) !== (this.root >= 0))
      throw new Error('road distance: a packed box tree of inconsistent sizes');
  }

  /**
   * Opens nodes in the order of `bound` (a lower bound over everything under a box) while it
   * does not exceed the cut-off; each item reached goes to `visit`, which returns the new
   * cut-off (a smaller one prunes more; -Infinity stops the walk).
   */
  walk(bound: BoxBound, visit: (item: number, key: number) => number, cutoff = Infinity): void {
    if (this.root < 0) return;
    const b = this.boxes;
    let size = this.push(0, this.root, bound(b[4 * this.root], b[4 * this.root + 1], b[4 * this.root + 2], b[4 * this.root + 3]));
    while (size > 0) {
      const node = this.heapNodes[0];
      const key = this.heapKeys[0];
      // pop: move the last entry down from the top
      size--;
      if (size > 0) {
        const lastNode = this.heapNodes[size], lastKey = this.heapKeys[size];
        let i = 0;
        for (;;) {
          let c = 2 * i + 1;
          if (c >= size) break;
          if (c + 1 < size && this.heapKeys[c + 1] < this.heapKeys[c]) c++;
          if (this.heapKeys[c] >= lastKey) break;
          this.heapNodes[i] = this.heapNodes[c];
          this.heapKeys[i] = this.heapKeys[c];
          i = c;
        }
        this.heapNodes[i] = lastNode;
        this.heapKeys[i] = lastKey;
      }
      if (key > cutoff) return;
      if (node < this.count) {
        cutoff = visit(this.ref[node], key);
        continue;
      }
      for (let c = this.ref[node], end = c + this.children[node]; c < end; c++) {
        const k = bound(b[4 * c], b[4 * c + 1], b[4 * c + 2], b[4 * c + 3]);
        if (k <= cutoff) size = this.push(size, c, k);
      }
    }
  }

  /** Adds a node to the heap of `size` entries; the new size. */
  private push(size: number, node: number, key: number): number {
    if (size === this.heapNodes.length) this.grow();
    let i = size;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (this.heapKeys[parent] <= key) break;
      this.heapNodes[i] = this.heapNodes[parent];
      this.heapKeys[i] = this.heapKeys[parent];
      i = parent;
    }
    this.heapNodes[i] = node;
    this.heapKeys[i] = key;
    return size + 1;
  }

  private grow(): void {
    const nodes = new Int32Array(this.heapNodes.length * 2), keys = new Float64Array(this.heapKeys.length * 2);
    nodes.set(this.heapNodes);
    keys.set(this.heapKeys);
    this.heapNodes = nodes;
    this.heapKeys = keys;
  }
}
