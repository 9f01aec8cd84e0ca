// Counts overflowed numeric cells in a DBF. A dBase writer that cannot fit a number into an
// N or F field fills it with asterisks ('**********': INCRA's cd_quilomb in most rows of the
// real layer). GDAL (shapelib) reads such a cell as NULL, like an empty one, so without this
// count an overflow would vanish silently; the loaders report it (facts.fields.overflowed).
// Likewise a C field with text after a NUL: GDAL reads it up to the NUL, the rest is lost
// (facts.fields.cutAtNul). One streaming pass over the records (flat memory), reading only
// the N/F fields' first byte that is not a space, and the C fields up to a NUL.
import { createReadStream } from 'node:fs';
import { open } from 'node:fs/promises';
import { layerPart } from './layer-parts.ts';
import { textAfterNul } from './read/dbf.ts';

interface CountedField {
  name: string;
  offset: number;
  length: number;
  numeric: boolean;
}

/** What one pass counts, per lower-case DBF field name (fields without any are left out). */
export interface DbfCellCounts {
  overflowed: Record<string, number>;
  cutAtNul: Record<string, number>;
}

async function countedFields(dbf: string): Promise<{ headerLength: number; recordLength: number; fields: CountedField[] }> {
  const fh = await open(dbf);
  try {
    const head = Buffer.alloc(32);
    await fh.read(head, 0, 32, 0);
    const headerLength = head.readUInt16LE(8);
    const recordLength = head.readUInt16LE(10);
    const desc = Buffer.alloc(Math.max(0, headerLength - 32));
    await fh.read(desc, 0, desc.length, 32);
    const fields: CountedField[] = [];
    let offset = 1; // the deletion flag
    for (let p = 0; p + 32 <= desc.length && desc[p] !== 0x0d; p += 32) {
      const name = desc.toString('latin1', p, p + 11).replace(/\0.*$/s, '').trim().toLowerCase();
      const type = String.fromCharCode(desc[p + 11]).toUpperCase();
      const length = desc[p + 16];
      if (type === 'N' || type === 'F' || type === 'C') fields.push({ name, offset, length, numeric: type !== 'C' });
      offset += length;
    }
    return { headerLength, recordLength, fields };
  } finally {
    await fh.close();
  }
}

/** Overflowed cells per numeric field and text cut at a NUL per C field. Deleted records are skipped. */
export async function countDbfCells(dbf: string): Promise<DbfCellCounts> {
  const { headerLength, recordLength, fields } = await countedFields(dbf);
  const counts: DbfCellCounts = { overflowed: {}, cutAtNul: {} };
  if (!fields.length || recordLength <= 0) return counts;
  const add = (m: Record<string, number>, name: string) => (m[name] = (m[name] ?? 0) + 1);
  let rest: Buffer = Buffer.alloc(0);
  for await (const chunk of createReadStream(dbf, { start: headerLength, highWaterMark: 1 << 20 })) {
    const buf = rest.length ? Buffer.concat([rest, chunk as Buffer]) : (chunk as Buffer);
    let p = 0;
    for (; p + recordLength <= buf.length; p += recordLength) {
      if (buf[p] === 0x1a) return counts; // end of file marker
      if (buf[p] === 0x2a) continue; // deleted record
      for (const f of fields) {
        let i = p + f.offset;
        const end = i + f.length;
        if (f.numeric) {
          while (i < end && buf[i] === 0x20) i++;
          if (i < end && buf[i] === 0x2a) add(counts.overflowed, f.name);
          continue;
        }
        const nul = buf.indexOf(0, i);
        if (nul >= 0 && nul < end && textAfterNul(buf, nul, end)) add(counts.cutAtNul, f.name);
      }
    }
    rest = buf.subarray(p);
  }
  return counts;
}

/** The same for the DBF beside a .shp (extension in any case: layer-parts.ts); nothing counted when there is none. */
export async function countShapefileCells(shp: string): Promise<DbfCellCounts> {
  const dbf = layerPart(shp, '.dbf');
  return dbf ? countDbfCells(dbf) : { overflowed: {}, cutAtNul: {} };
}
