-- A month's partner-list changes against the month current when it was loaded, for the
-- report's count (facts qsa_alteradas); the events compare at publish time instead.
INSERT INTO derived.cnpj_qsa_changes (snapshot_id, previous_snapshot_id, cnpj_basico, entraram, sairam)
SELECT {{snapshot_id}}, {{previous_snapshot_id}}, d.cnpj_basico, d.entraram, d.sairam
FROM ({{diff}}) d
