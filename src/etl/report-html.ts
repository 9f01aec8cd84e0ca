// The quality report as one self-contained HTML page (no script, no network): counts,
// rejected rows by reason with examples, the change against the previous snapshot (per
// state or municipality when the tables are kept), a map of rejected and repaired
// geometries over Brazil, the trend of row counts across snapshots, then every fact.
import type { QualityReport } from './quality.ts';
import { brazilDateTime } from '../dates.ts';
import type { ReportExtras } from './report-data.ts';
import { blockedSays } from './report-status.ts';
import type { RowExample } from './verdict-examples.ts';

// Pipelines may add their own sections to the facts (facts.zarc, facts.snv, …); the page shows them too.
const KNOWN_FACTS = new Set(['rejected', 'dropped', 'geometry', 'fields', 'dates', 'encoding', 'layers', 'failures', 'notes', 'examples', 'locations']);

const esc = (s: unknown) => String(s).replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
const int = (n: number | null | undefined) => (n === null || n === undefined ? '—' : n.toLocaleString('en-US'));

function table(title: string, rows: [string, unknown][], id?: string): string {
  if (rows.length === 0) return '';
  return `<h2>${esc(title)}</h2><table${id ? ` id="${id}"` : ''}>${rows.map(([k, v]) => `<tr><th>${esc(k)}</th><td>${esc(typeof v === 'object' ? JSON.stringify(v) : v)}</td></tr>`).join('')}</table>`;
}

/** A coarse outline of Brazil (lon, lat), drawn when no municipalities are loaded. */
const BRAZIL: [number, number][] = [
  [-60.7, 5.2], [-59.6, 1.8], [-56.5, 1.9], [-54.0, 2.3], [-51.6, 4.4], [-50.0, 1.8], [-49.9, 0.0], [-48.4, -1.0], [-44.5, -2.4],
  [-41.0, -2.9], [-38.5, -3.7], [-35.2, -5.5], [-34.8, -7.5], [-35.5, -9.5], [-37.0, -11.0], [-38.5, -13.0], [-39.0, -15.0],
  [-39.2, -17.7], [-40.3, -20.3], [-41.0, -22.0], [-43.2, -23.0], [-45.0, -23.8], [-47.0, -24.6], [-48.5, -26.0], [-48.6, -28.5],
  [-50.0, -30.5], [-51.5, -32.0], [-53.4, -33.7], [-53.5, -32.5], [-55.6, -30.9], [-57.6, -30.2], [-56.0, -28.0], [-53.7, -26.2],
  [-54.6, -25.5], [-54.3, -24.0], [-55.5, -22.5], [-57.8, -22.1], [-58.1, -20.2], [-57.5, -18.0], [-58.4, -16.3], [-60.2, -15.1],
  [-60.5, -13.8], [-62.2, -13.1], [-64.4, -12.4], [-65.3, -10.9], [-66.6, -9.9], [-68.6, -11.0], [-70.6, -11.0], [-70.6, -9.5],
  [-72.2, -10.0], [-73.2, -9.4], [-74.0, -7.5], [-72.9, -5.1], [-70.0, -4.2], [-69.4, -1.1], [-69.6, 0.6], [-67.9, 1.8],
  [-66.9, 1.2], [-64.0, 2.0], [-64.0, 4.0], [-62.9, 3.6], [-61.0, 4.5],
];
const coarsePath = () => `M ${BRAZIL.map(([x, y]) => `${x} ${-y}`).join(' L ')} Z`;

function examplesTable(reason: string, list: RowExample[]): string {
  // Columns with values first; columns empty in every example are left out.
  const filled = (k: string) => list.filter((e) => e.values[k] !== null && e.values[k] !== undefined && e.values[k] !== '').length;
  const keys = [...new Set(list.flatMap((e) => Object.keys(e.values)))].filter((k) => filled(k) > 0).sort((a, b) => filled(b) - filled(a)).slice(0, 16);
  const cell = (v: unknown) => {
    const t = v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v);
    return esc(t.length > 80 ? t.slice(0, 79) + '…' : t);
  };
  return `<details open><summary>${esc(reason)}: ${list.length} example${list.length === 1 ? '' : 's'}</summary>
<div class="scroll"><table class="examples" data-reason="${esc(reason)}"><thead><tr><th>source</th><th>row</th>${keys.map((k) => `<th>${esc(k)}</th>`).join('')}<th>where</th></tr></thead><tbody>
${list.map((e) => `<tr><td>${esc(e.source ?? '')}</td><td>${e.row ?? ''}${e.line !== undefined ? ` (line ${e.line})` : ''}</td>${keys.map((k) => `<td>${cell(e.values[k])}</td>`).join('')}<td>${e.lon !== undefined ? `${e.lon}, ${e.lat}` : ''}</td></tr>`).join('\n')}
</tbody></table></div></details>`;
}

/** The input a reason belongs to: '' for the main one (the counts'), else its prefix ('apps' of 'apps:not_linked_ambiguous'). */
const inputOf = (reason: string) => /^([a-z0-9_]+):/.exec(reason)?.[1] ?? '';

function reasons(title: string, id: string, counts: Record<string, number>, examples: Record<string, RowExample[]>): string {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  if (!entries.length) return '';
  const row = ([k, n]: [string, number], cls = '') => `<tr${cls ? ` class="${cls}"` : ''}><td>${esc(k)}</td><td class="n">${int(n)}</td></tr>`;
  // Further inputs' reasons (SICAR's themes) are not in the counts: each group is totalled apart, so that the first total is the counts'.
  const inputs = [...new Set(entries.map(([k]) => inputOf(k)))].filter(Boolean).sort();
  const total = (of: [string, number][], label: string) => row([label, of.reduce((a, [, n]) => a + n, 0)], 'total');
  const main = entries.filter(([k]) => !inputOf(k));
  const body = !inputs.length ? entries.map((e) => row(e)).join('') : [
    main.map((e) => row(e)).join('') + total(main, 'total (the counts above)'),
    ...inputs.map((p) => {
      const of = entries.filter(([k]) => inputOf(k) === p);
      return of.map((e) => row(e, 'input')).join('') + total(of, `total of ${p} (another input, not in the counts above)`);
    }),
  ].join('');
  return `<h2>${esc(title)}</h2><table id="${id}"><tr><th>reason</th><th>rows</th></tr>${body}</table>
${entries.filter(([k]) => examples[k]?.length).map(([k]) => examplesTable(k, examples[k])).join('\n')}`;
}

function change(r: QualityReport, x: ReportExtras | undefined): string {
  const c = r.change;
  // The snapshot compared with is the one current at load time: for a backfill, a later date.
  const prevAsOf = x?.trend.find((p) => p.snapshot_id === c.previous_snapshot_id)?.as_of;
  const later = !!prevAsOf && prevAsOf > r.as_of;
  const overall = table(later ? 'Change against the snapshot current at load time (dated after this one)' : 'Change against the previous snapshot', [
    ['previous snapshot', c.previous_snapshot_id === null ? 'none (first load)' : `${c.previous_snapshot_id}${prevAsOf ? ` (as of ${prevAsOf})` : ''}`],
    ['rows', `${int(c.previous_rows)} → ${int(c.rows)}${c.delta_share !== null ? ` (${c.delta_share >= 0 ? '+' : ''}${(c.delta_share * 100).toFixed(1)} %)` : ''}`],
    ['keys added', int(c.added)],
    ['keys removed', int(c.removed)],
  ], 'change');
  if (!x?.change?.rows.length) return overall;
  return `${overall}<h3>Rows per ${esc(x.change.by)} (largest changes first)</h3><table id="change-by-area"><tr><th>${esc(x.change.by)}</th><th>previous</th><th>this load</th><th>change</th></tr>
${x.change.rows.map((a) => `<tr><td>${esc(a.area)}</td><td class="n">${int(a.previous)}</td><td class="n">${int(a.current)}</td><td class="n">${a.current - a.previous >= 0 ? '+' : ''}${int(a.current - a.previous)}</td></tr>`).join('')}</table>`;
}

/** Whether the load read geometries at all (ZARC's tables and the CAR holders' CSV do not). */
const spatial = (r: QualityReport) =>
  r.facts.geometry.srid !== null || r.facts.layers.length > 0 || !!r.facts.locations?.rejected.length || !!r.facts.locations?.repaired.length;

function map(r: QualityReport, x: ReportExtras | undefined): string {
  if (!spatial(r)) return '';
  const loc = r.facts.locations ?? { repaired: [], rejected: [] };
  // The coarse outline always (so that Brazil is recognisable), the loaded municipalities over it.
  const outline = `<path class="outline coarse" d="${coarsePath()}"/>` + (x?.outline ?? []).map((d) => `<path class="outline municipio" d="${esc(d)}"/>`).join('');
  const dots = (pts: [number, number][], cls: string) => pts.map(([lon, lat]) => `<circle class="${cls}" cx="${lon}" cy="${-lat}" r="0.3"/>`).join('');
  return `<h2>Where the rejected and repaired geometries are</h2>
<p><span class="key rejected"></span> rejected or dropped rows with a geometry: ${int(loc.rejected.length)} · <span class="key repaired"></span> repaired geometries: ${int(loc.repaired.length)}${x?.outline?.length ? ` · ${int(x.outline.length)} municipalities drawn` : ' · no municipalities loaded: coarse outline only'}</p>
<svg id="map" xmlns="http://www.w3.org/2000/svg" viewBox="-74.5 -6 46.5 40.5" width="520" height="453" role="img" aria-label="map of Brazil">
<g>${outline}</g><g>${dots(loc.repaired, 'repaired')}</g><g>${dots(loc.rejected, 'rejected')}</g></svg>`;
}

function trend(x: ReportExtras | undefined, snapshotId: number): string {
  const pts = x?.trend ?? [];
  if (!pts.length) return '';
  const max = Math.max(1, ...pts.map((p) => p.rows ?? 0));
  const w = 24;
  const bars = pts.map((p, i) => {
    const h = Math.round(((p.rows ?? 0) / max) * 100);
    return `<rect class="bar${p.snapshot_id === snapshotId ? ' this' : ''}" data-snapshot="${p.snapshot_id}" x="${i * w + 2}" y="${110 - h}" width="${w - 4}" height="${h}"><title>${esc(p.as_of)}: ${int(p.rows)} rows (snapshot ${p.snapshot_id}, ${esc(p.status)})</title></rect>`;
  });
  return `<h2>Rows across snapshots</h2><svg id="trend" xmlns="http://www.w3.org/2000/svg" width="${Math.max(200, pts.length * w + 4)}" height="112">${bars.join('')}</svg>
<table id="trend-table"><tr><th>snapshot</th><th>as of</th><th>rows</th><th>status</th></tr>${pts.map((p) => `<tr${p.snapshot_id === snapshotId ? ' class="this"' : ''}><td>${p.snapshot_id}</td><td>${esc(p.as_of)}</td><td class="n">${int(p.rows)}</td><td>${esc(p.status)}</td></tr>`).join('')}</table>`;
}

// Rules whose value and threshold are shares of rows (shown as percentages).
const SHARE_RULES = new Set(['row_drop', 'rejected_share', 'input_rejected_share', 'control_characters']);

/** Every rule of the gate with its measured value and threshold (reports written before `rules` have only their failures). */
function gateRules(r: QualityReport): string {
  const rules = r.gate.rules;
  if (!rules?.length) return '';
  const fmt = (rule: string, v: number | null) =>
    v === null ? '—' : SHARE_RULES.has(rule) ? `${(v * 100).toFixed(2)} %` : Number.isInteger(v) ? int(v) : String(v);
  return `<table id="gate-rules"><tr><th>rule</th><th>measured</th><th>threshold</th><th>result</th></tr>${rules.map((g) =>
    `<tr data-rule="${esc(g.rule)}"><td>${esc(g.rule)}</td><td class="n">${esc(fmt(g.rule, g.value))}</td><td class="n">${g.threshold === null ? '—' : `${g.compare === 'above' ? '&gt;' : '≤'} ${esc(fmt(g.rule, g.threshold))}`}</td><td class="${g.passed ? 'ok' : 'bad'}">${g.passed ? 'passed' : 'failed'}</td></tr>`).join('')}</table>`;
}

export function renderReportHtml(r: QualityReport, extras?: ReportExtras): string {
  const f = r.facts;
  const verdict = r.gate.passed ? 'passed' : r.gate.forced ? 'failed, published with --force' : 'blocked';
  const examples = f.examples ?? {};
  // The page a run writes knows only its gate: blocked, it says what to do against the snapshot current then.
  const standing = r.publication?.says ?? (!r.gate.passed && !r.gate.forced ? blockedSays(r, r.change.previous_snapshot_id) : null);
  const when = new Date(r.generated_at);
  // Source text can be one word of thousands of letters (an unknown status): notes and fact cells wrap it; the examples scroll.
  return `<!doctype html><html lang="pt-BR"><head><meta charset="utf-8"><title>Quality report ${esc(r.dataset)} ${esc(r.uf ?? '')} #${r.snapshot_id}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;max-width:72em}table{border-collapse:collapse;margin-bottom:1em}th,td{border:1px solid #ccc;padding:.3em .6em;text-align:left;vertical-align:top}th{background:#f4f4f4}td.n{text-align:right}li,td{overflow-wrap:anywhere}table.examples td{overflow-wrap:normal}.bad{color:#b00}.ok{color:#070}
table.examples{font-size:12px}.scroll{overflow-x:auto}details{margin:.5em 0 1em}svg#map{background:#eef4f8;border:1px solid #ccc}.outline{fill:#fff;stroke:#889;stroke-width:.05}.outline.coarse{stroke-width:.12}
circle.rejected{fill:#c00;fill-opacity:.75}circle.repaired{fill:#e90;fill-opacity:.75}.key{display:inline-block;width:.8em;height:.8em;border-radius:50%}.key.rejected{background:#c00}.key.repaired{background:#e90}
tr.total td{font-weight:bold}tr.input td:first-child{padding-left:1.5em}rect.bar{fill:#89a}rect.bar.this{fill:#357}tr.this{font-weight:bold}</style></head><body>
<h1>${esc(r.dataset)}${r.uf ? ' ' + esc(r.uf) : ''}: snapshot ${r.snapshot_id} (as of ${esc(r.as_of)})</h1>
<p>Run ${r.run_id}, generated ${esc(Number.isNaN(when.getTime()) ? r.generated_at : `${brazilDateTime(when)} (Brasília time)`)}. Gate: <strong class="${r.gate.passed ? 'ok' : 'bad'}">${esc(verdict)}</strong></p>
${standing ? `<p id="publication" class="${r.publication?.status === 'current' ? 'ok' : 'bad'}">${esc(standing)}</p>` : ''}
${r.gate.failures.length ? `<ul class="bad">${r.gate.failures.map((x) => `<li>${esc(x.rule)}: ${esc(x.message)}</li>`).join('')}</ul>` : ''}
${gateRules(r)}
<h2>Counts</h2><table id="counts">${(['read', 'loaded', 'rejected', 'dropped'] as const).map((k) => [k, r.counts[k]] as const).map(([k, v]) => `<tr><th>${esc(k)}</th><td class="n" data-count="${esc(k)}">${int(v)}</td></tr>`).join('')}</table>
${reasons('Rejected rows by reason', 'rejected', f.rejected, examples)}
${reasons('Dropped rows by reason (by design: duplicates, other states)', 'dropped', f.dropped, examples)}
${change(r, extras)}
${map(r, extras)}
${trend(extras, r.snapshot_id)}
${spatial(r) ? table('Geometry', Object.entries(f.geometry)) : ''}
${table('Empty values per field', Object.entries(f.fields.empty))}
${table('Fields', [['missing optional', f.fields.missingOptional.join(', ') || '—'], ['unknown (kept in extra)', f.fields.unknown.join(', ') || '—']])}
${table('Unparseable dates', Object.entries(f.dates.unparseable))}
${table('Date placeholders', Object.entries(f.dates.placeholders))}
${table('Dates after the release date (NULL, text kept in extra)', Object.entries(f.dates.implausible ?? {}))}
${table('Values that did not parse (NULL, text kept in extra)', Object.entries(f.fields.unparsed ?? {}))}
${table('Overflowed fields (asterisks: NULL)', Object.entries(f.fields.overflowed ?? {}))}
${table('Text cut at a NUL byte (the rest lost)', Object.entries(f.fields.cutAtNul ?? {}))}
${table('Encoding', Object.entries(f.encoding))}
${table('Source files', [...r.source.files, ...(r.source.parts ?? [])].map((x) => [x.name, `${x.size} bytes, sha256 ${x.sha256}`] as [string, unknown]))}
${table('Layers', f.layers.map((l) => [l.name, `${l.features} features, EPSG:${l.srid}, ${l.encoding}${l.decided_by ? ` (by ${l.decided_by})` : ''}`] as [string, unknown]))}
${Object.entries(f)
  .filter(([k]) => !KNOWN_FACTS.has(k))
  .map(([k, v]) => table(`Details: ${k}`, Object.entries((v ?? {}) as Record<string, unknown>)))
  .join('')}
${f.notes.length ? `<h2>Notes</h2><ul>${f.notes.map((n) => `<li>${esc(n)}</li>`).join('')}</ul>` : ''}
</body></html>`;
}
