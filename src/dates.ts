// Dates as the command line and the API take them.

/**
 * A real calendar date written YYYY-MM-DD, and one PostgreSQL takes too: 2026-02-30 is not
 * one, and neither is year 0000 (a date to JavaScript only).
 */
export function isCalendarDate(v: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(v) || v < '0001-01-01') return false;
  const d = new Date(`${v}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === v;
}
