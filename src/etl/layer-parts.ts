// Where a shapefile's parts are: the files (or zip members) named like its .shp with another
// extension, the extension in any case. Windows tools write `x.Shx`, `x.Dbf`, `x.Prj`,
// `x.Cpg` (and `x.Shp`); looking for `.dbf` or `.DBF` alone failed such a layer ("has no
// .shx") or passed over its .Prj and .Cpg (CRS and encoding assumed). Every reader finds a
// part here: the zip reader, the folder of extracted parts, the encoding and CRS rules, and
// GDAL, whose shapefile driver tries only all-lower and all-upper extensions and is shown
// such a layer under lower-case names (gdalOpenable).
import fs from 'node:fs';
import path from 'node:path';
import { agroTempDir, sweepDeadTempDirs, tempDirPrefix } from './temp-dirs.ts';

/** The extensions of a shapefile layer's parts (lower case). */
export type PartExt = '.shp' | '.shx' | '.dbf' | '.prj' | '.cpg' | '.cst';
export const PART_EXTS: readonly PartExt[] = ['.shp', '.shx', '.dbf', '.prj', '.cpg', '.cst'];

/** Same stem, the extension in any case: `x.Dbf` is `x.shp`'s .dbf part, `X.dbf` is not. */
const stemOf = (name: string) => name.slice(0, -path.extname(name).length || undefined);

/**
 * Among `names` (a folder's files, or a zip's member names with their folders), the `ext`
 * part of the layer whose .shp is named `shp`: the same stem and folder, the extension in any
 * case. The lower-case name first, then the upper-case one, then the first by name; null when
 * there is none.
 */
export function partAmong(names: readonly string[], shp: string, ext: PartExt): string | null {
  const stem = stemOf(shp);
  const found = names.filter((n) => n.length === stem.length + ext.length && n.startsWith(stem) && n.slice(stem.length).toLowerCase() === ext);
  if (!found.length) return null;
  return found.find((n) => n === stem + ext) ?? found.find((n) => n === stem + ext.toUpperCase()) ?? found.sort()[0];
}

/** The file beside `shp` that is its `ext` part (extension in any case), or null. */
export function layerPart(shp: string, ext: PartExt): string | null {
  const stem = stemOf(shp);
  // the usual spellings answer without listing the folder
  for (const e of [ext, ext.toUpperCase()]) if (fs.existsSync(stem + e)) return stem + e;
  let names: string[];
  try {
    names = fs.readdirSync(path.dirname(shp));
  } catch {
    return null;
  }
  const name = partAmong(names, path.basename(shp), ext);
  return name ? path.join(path.dirname(shp), name) : null;
}

/** Whether GDAL's shapefile driver finds the part (it tries the lower- and the upper-case extension only). */
const gdalFinds = (stem: string, part: string) => part === stem + path.extname(part).toLowerCase() || part === stem + path.extname(part).toUpperCase();

/** When this process last swept a source folder's dead stand-in folders. */
const swept = new Map<string, number>();
const SWEEP_EVERY_MS = 10 * 60_000;

/**
 * The layer as GDAL opens it: `shp` itself when GDAL finds each of its parts, else a stand-in
 * .shp in a folder of its own beside it (else in the temporary folder), holding every part under its lower-case extension
 * (hard links, else copies); `release` removes that folder once GDAL has closed the layer.
 */
export function gdalOpenable(shp: string): { shp: string; release: () => void } {
  const stem = stemOf(shp);
  const parts = PART_EXTS.map((e) => (e === '.shp' ? shp : layerPart(shp, e))).filter((p): p is string => p !== null);
  if (parts.every((p) => gdalFinds(stem, p))) return { shp, release: () => {} };
  let dir: string;
  try {
    // links need the same file system; a killed read's folder there goes first (SIGKILL runs no
    // release), a folder swept at most every 10 minutes (one of thousands of layers is not listed for each)
    const folder = path.dirname(shp);
    if (Date.now() - (swept.get(folder) ?? -Infinity) > SWEEP_EVERY_MS) {
      swept.set(folder, Date.now());
      sweepDeadTempDirs(folder);
    }
    dir = fs.mkdtempSync(path.join(folder, `.${tempDirPrefix('parts')}`));
  } catch {
    dir = agroTempDir('parts'); // the source's folder may be read-only
  }
  const base = path.join(dir, path.basename(stem));
  const release = () => fs.rmSync(dir, { recursive: true, force: true });
  try {
    for (const part of parts) {
      const to = base + path.extname(part).toLowerCase();
      try {
        fs.linkSync(part, to);
      } catch {
        fs.copyFileSync(part, to);
      }
    }
  } catch (e) {
    release(); // a copy that failed (a full disk) leaves no folder behind
    throw e;
  }
  return { shp: `${base}.shp`, release };
}
