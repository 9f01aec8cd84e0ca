// The engine's gate rules at their thresholds (contract §2: a load is blocked when its rows
// dropped MORE than 20 % against the current snapshot, or MORE than 1 % of its rows were
// rejected). The pipelines' tests block loads far past them (half the rows); these pin the
// boundary itself: exactly at the threshold publishes, one row past it is blocked.
import { describe, expect, test } from 'vitest';
import { loadConfig } from '../src/config.ts';
import { emptyFacts, evaluateGate, type ChangeSummary } from '../src/etl/quality.ts';

const { quality } = loadConfig({});
const change = (previous: number, rows: number): ChangeSummary => ({ previous_snapshot_id: 7, previous_rows: previous, rows, delta_share: null, added: null, removed: null });
const counts = (read: number, rejected: number) => ({ read, loaded: read - rejected, rejected, dropped: 0 });
const rules = (c: ReturnType<typeof counts>, ch: ChangeSummary) => evaluateGate(c, ch, emptyFacts(), quality).map((f) => f.rule);

describe('gate thresholds (contract §2)', () => {
  test('the defaults are the contract’s: 20 % drop, 1 % rejected', () => {
    expect(quality).toEqual({ maxRowDrop: 0.2, maxRejectedShare: 0.01 });
  });

  test('row_drop: 20 % fewer rows publishes, 20.1 % is blocked with the figures', () => {
    expect(rules(counts(800, 0), change(1000, 800))).toEqual([]);
    expect(evaluateGate(counts(799, 0), change(1000, 799), emptyFacts(), quality)).toEqual([
      { rule: 'row_drop', message: 'rows dropped 20.1 % against snapshot 7 (1000 → 799)', value: 0.201, threshold: 0.2 },
    ]);
  });

  test('rejected_share: 1 % rejected publishes, 1.1 % is blocked with the figures', () => {
    expect(rules(counts(1000, 10), change(1000, 990))).toEqual([]);
    expect(evaluateGate(counts(1000, 11), change(1000, 989), emptyFacts(), quality)).toEqual([
      { rule: 'rejected_share', message: '11 of 1000 rows rejected (1.10 %)', value: 0.011, threshold: 0.01 },
    ]);
  });

  test('no previous snapshot: no drop to measure; nothing loaded: empty', () => {
    expect(rules(counts(10, 0), { ...change(0, 10), previous_snapshot_id: null, previous_rows: null })).toEqual([]);
    expect(rules(counts(0, 0), change(1000, 0))).toEqual(['empty', 'row_drop']);
  });
});
