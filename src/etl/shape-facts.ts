// The facts every shaped load reports the same way (shape-run.ts calls them after the index
// stage), per input: verdicts were folded as the passes ended; here repairs, layers, SRID and
// encodings, missing and unknown fields, empty values per relation, conversions that failed,
// implausible dates, overflowed cells, reader notes and U+FFFD; and the ledger details of the
// read and normalise stages. One input speaks as it always has; several inputs speak per input
// (`<NAME>: ` notes, `<name>:` fields), their read notes after the counts.
import type pg from 'pg';
import { countShapefileCells } from './dbf-overflow.ts';
import { encodingNotes, readerNote } from './layers.ts';
import { countNulls } from './load-steps.ts';
import { matchHeader } from './header-match.ts';
import { addCounts, addRepairFacts, describeLayer, noteImplausibleDates, sum } from './quality.ts';
import { addCsvFacts, type ContentStaged } from './shape-csv.ts';
import type { InputDone, Plan, PlanInput, RunStep } from './shape-run.ts';
import { countChecks, countOverflowedText, countReplacementChars } from './sql/shape.ts';
import { countTypedChecks, countTypedOverflows } from './sql/typed.ts';

/** The prefix of a further input's counts in the facts (`apps:bad_car_number`, `apps:area_ha`). */
export const inputPrefix = (name: string) => `${name.toLowerCase()}:`;

/** The facts every shaped load reports the same way, per input; the pipeline's counts join them before the overflowed cells. */
export async function commonFacts(run: RunStep, plan: Plan, planOf: Map<InputDone, PlanInput>): Promise<void> {
  const { client, facts } = run;
  const done = run.inputs;
  const main = done[0];
  const mainPlan = planOf.get(main)!;
  const several = plan.perInput;
  for (const d of done) if (d.repair) addRepairFacts(facts, d.repair);
  facts.geometry.empty = main.verdicts.no_geometry ?? 0;
  facts.geometry.outsideBrazil = main.verdicts.outside_brazil ?? 0;
  const layers = done.flatMap((d) => d.staged.layers);
  for (const l of layers) {
    facts.layers.push(describeLayer(l));
    if (l.sridAssumed) facts.geometry.sridAssumed = true;
  }
  // SRID and encoding are the main input's first layer's, assumed when any of its layers' was.
  const first = main.staged.layers[0];
  if (first) {
    facts.geometry.srid = first.srid;
    facts.encoding.name = first.encoding;
    facts.encoding.assumed = main.staged.layers.some((l) => l.encodingAssumed);
  }
  for (const d of done) if (d.staged.csv) addCsvFacts(facts, d.staged.csv);
  // A .dbf shorter than its .shp (an export or a download cut short): shapes without attributes were not loaded.
  const orphans = done.reduce((a, d) => a + (d.staged.shapesWithoutRecord ?? 0), 0);
  if (orphans) {
    facts.failures.push({ rule: 'shapes_without_record', message: `${orphans} shapes after the .dbf's last record (the .dbf is shorter than the .shp): not loaded`, value: orphans, threshold: 0 });
  }
  facts.fields.missingOptional = main.staged.missingOptional.filter((n) => mainPlan.rel.reportedMissing.has(n));
  facts.fields.unknown = several ? [...new Set(done.flatMap((d) => d.staged.unknown))] : main.staged.unknown;

  // How the inputs were read: one input's notes first; several inputs' after their counts (the report's order).
  const readNotes = () => {
    const reader = done.filter((d) => d.staged.reader).map((d) => `${several ? `${d.name}: ` : ''}${readerNote({ reader: d.staged.reader!, deleted: d.staged.deleted ?? 0, unparsed: d.staged.unparsed ?? 0, ringsClosed: d.staged.ringsClosed ?? 0, shapesWithoutRecord: d.staged.shapesWithoutRecord ?? 0 })}`);
    if (several) facts.notes.push(...reader);
    if (!several && main.staged.layers.length > 1) facts.notes.push(`${main.staged.layers.length} shapefiles in the zip, loaded together: ${main.staged.layers.map((l) => l.name).join(', ')}`);
    if (facts.geometry.sridAssumed) facts.notes.push(`a layer had no .prj: EPSG:${mainPlan.read.srid} (SIRGAS 2000) assumed`);
    facts.notes.push(...encodingNotes(layers));
    if (!several) facts.notes.push(...reader);
  };
  if (!several) readNotes();
  for (const d of done) {
    if (!d.staged.unknown.length) continue;
    const where = planOf.get(d)!.rel.columns.some((c) => c.role === 'extra') ? 'kept in extra' : 'not loaded';
    run.ctx.log.warn({ columns: d.staged.unknown, ...(several && { input: d.name }) }, `source columns without a mapping, ${where}`);
  }

  for (const o of plan.outputs) {
    if (o.rel.counted.length) Object.assign(facts.fields.empty, await countNulls(client, run.built[o.rel.name].table, o.rel.counted));
  }
  for (const d of done) {
    const input = planOf.get(d)!;
    if (input.ownCounts) continue;
    d.checks = input.typed ? await countTypedChecks(client, { rel: input.rel, kept: input.kept(d.t) }) : await countChecks(client, { rel: input.rel, kept: input.kept(d.t), stage: d.t.stage, asOf: run.asOf });
    const { bad, placeholder, late } = d.checks;
    const byName = new Map(input.rel.checked.map((c) => [c.name, c]));
    for (const [col, n] of Object.entries(bad)) {
      const rule = byName.get(col)!.rule;
      if (rule.isDate) facts.dates.unparseable[col] = n;
      else {
        facts.notes.push(`${col}: ${n} value(s) are ${rule.what} (loaded as NULL, source text kept in extra)`);
        addCounts(facts, 'unparsed', { [col]: n });
      }
    }
    Object.assign(facts.dates.placeholders, placeholder);
    addCounts(facts, 'implausible', late);
  }
  noteImplausibleDates(facts, run.asOf);
  await plan.counted?.(run);
  for (const d of done) {
    const counts = await overflowCounts(client, planOf.get(d)!, d, several ? inputPrefix(d.name) : '');
    addCounts(facts, 'overflowed', counts.overflowed);
    addCounts(facts, 'cutAtNul', counts.cutAtNul);
  }
  if (facts.fields.overflowed) {
    facts.notes.push(several
      ? `overflowed numeric cells (asterisks: no value, NULL) per layer and field: ${JSON.stringify(facts.fields.overflowed)}`
      : `overflowed cells (a run of asterisks: no value, loaded as NULL) per field: ${JSON.stringify(facts.fields.overflowed)}`);
  }
  if (facts.fields.cutAtNul) {
    facts.notes.push(`DBF text cells with text after a NUL byte, loaded up to the NUL (as GDAL reads them; the rest is lost) per field: ${JSON.stringify(facts.fields.cutAtNul)}`);
  }
  await plan.checked?.(run);
  if (several) readNotes();

  for (const d of done) await replacementChars(run, planOf.get(d)!, d, several ? `${d.name}: ` : '');
}

/**
 * Overflowed cells of an input: numeric DBF fields from the bytes (GDAL reads them as NULL) —
 * as the streaming reader counted them while reading, else one pass over each DBF —, and
 * unless its typed pass counts them, other staged text by etl.is_overflow. The same pass
 * gives the DBF text cells cut at a NUL (`cutAtNul`).
 */
async function overflowCounts(client: pg.ClientBase, input: PlanInput, d: InputDone, prefix: string): Promise<{ overflowed: Record<string, number>; cutAtNul: Record<string, number> }> {
  const rel = input.rel;
  // The field a source column was staged as, matched as the readers matched it (header-match.ts).
  const canonical = (src: string) => rel.staging[matchHeader([src], rel.staging).findIndex((i) => i !== null)]?.name ?? src;
  const out: Record<string, number> = {};
  const cutAtNul: Record<string, number> = {};
  const add = (m: Record<string, number>, c: string, n: number) => (m[prefix + c] = (m[prefix + c] ?? 0) + n);
  // Layers read by a layer reader (an input's own stager counts its own).
  if (d.staged.reader) {
    for (const l of d.staged.layers) {
      const counted = d.staged.overflowed
        ? { overflowed: d.staged.overflowed[l.name] ?? {}, cutAtNul: d.staged.cutAtNul?.[l.name] ?? {} }
        : await countShapefileCells(l.file);
      for (const [src, n] of Object.entries(counted.overflowed)) add(out, canonical(src), n);
      for (const [src, n] of Object.entries(counted.cutAtNul)) add(cutAtNul, canonical(src), n);
    }
  }
  if (input.ownCounts) return { overflowed: out, cutAtNul };
  // A typed pass listed them per row (no second scan of the staged text).
  const text = (input.typed && (await countTypedOverflows(client, d.t.classified))) || (await countOverflowedText(client, d.t.stage, rel.staging.map((f) => f.name)));
  for (const [c, n] of Object.entries(text)) add(out, c, n);
  return { overflowed: out, cutAtNul };
}

/** U+FFFD in an input's text: as the reader counted the strings, or per staged field (a note, or a gate failure). */
async function replacementChars(run: RunStep, input: PlanInput, d: InputDone, prefix: string): Promise<void> {
  const { facts } = run;
  if (input.replacementChars === 'own') return;
  if (input.replacementChars === 'reader') {
    facts.encoding.replacementChars += d.staged.replacementChars;
    return;
  }
  const fffd = await countReplacementChars(run.client, d.t.stage, input.rel.staging.map((f) => f.name));
  const total = sum(fffd);
  facts.encoding.replacementChars += total;
  if (total === 0) return;
  const where = Object.entries(fffd).map(([c, n]) => `${c} ${n}`).join(', ');
  facts.notes.push(`${prefix}U+FFFD replacement characters per field: ${where}`);
  if (input.replacementChars === 'fail') {
    facts.failures.push({
      rule: 'replacement_characters',
      message: `${total} U+FFFD replacement characters in the source text (${where}): accents were lost before publication`,
      value: total,
      threshold: 0,
    });
  }
}

/** The read stage's ledger detail of one input. */
export function singleReadDetail(s: ContentStaged): object {
  return {
    layers: s.layers.map(describeLayer), ...(s.reader && { reader: s.reader }), unknown: s.unknown,
    ...(s.csv && { csv: { encoding: s.csv.encoding, bad_rows: s.csv.badRows, bad_row_lines: s.csv.badRowSamples, files: s.csv.files.map((f) => ({ name: f.name, rows: f.rows, bad_rows: f.badRows, fingerprint: f.fingerprint })) } }),
  };
}

/** The read stage's ledger detail of several inputs: each one's rows, milliseconds, layers and reader. */
export function readDetail(done: InputDone[]): object {
  return Object.fromEntries(done.map((d) => [d.name, { rows: d.staged.rows, ms: d.readMs, layers: d.staged.layers.map((l) => l.name), ...(d.staged.reader ? { reader: d.staged.reader } : {}) }]));
}

/**
 * When each input's pass ran, in seconds from the start of the read stage, beside the read
 * stage's end: the passes overlap the read (the ledger's `read` ends when the last input is
 * staged; `normalise` covers what is left).
 */
export function timeline(done: InputDone[], spans: { start: number; end: number }[], readEnd: number) {
  const s = (ms: number) => Math.round(ms) / 1000;
  return {
    read_end_s: s(readEnd),
    inputs: done.map((d, i) => ({ input: d.name, read_s: s(d.readMs), typed_from_s: s(spans[i]?.start ?? -1), typed_to_s: s(spans[i]?.end ?? -1) })),
  };
}
