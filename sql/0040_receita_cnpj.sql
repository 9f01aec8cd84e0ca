-- Receita Federal CNPJ (SOURCES §10; contract §2b): one national snapshot per monthly
-- folder. Columns carry Receita's names; the templates match the declarations of
-- pipelines/receita-cnpj/layout.ts (checked by test/receita-cnpj.test.ts).
-- No foreign keys: orphan codes (motivo 32, qualificação 36, unknown países) are real and
-- are counted in the quality report, and the lookups are LEFT JOINed.

CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE EXTENSION IF NOT EXISTS unaccent;

-- The search key of names (accent- and case-insensitive similarity, /socio/search):
-- unaccent with its dictionary named, so the function can be IMMUTABLE and indexed.
CREATE FUNCTION etl.cnpj_busca(t text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
  SELECT lower(public.unaccent('public.unaccent'::regdictionary, t))
$$;

CREATE TABLE snap.cnpj_empresas__template (
  cnpj_basico                 text,
  razao_social                text,
  natureza_juridica           text,
  qualificacao_responsavel    text,
  capital_social              numeric,
  porte                       text,
  ente_federativo_responsavel text,
  cpf_titular_mascarado       text,
  extra                       jsonb,
  snapshot_id                 bigint
);

CREATE TABLE snap.cnpj_estabelecimentos__template (
  cnpj_basico                 text,
  cnpj_ordem                  text,
  cnpj_dv                     text,
  identificador_matriz_filial text,
  nome_fantasia               text,
  situacao_cadastral          text,
  data_situacao_cadastral     date,
  motivo_situacao_cadastral   text,
  nome_cidade_exterior        text,
  pais                        text,
  data_inicio_atividade       date,
  cnae_fiscal_principal       text,
  cnae_fiscal_secundaria      text[],
  tipo_logradouro             text,
  logradouro                  text,
  numero                      text,
  complemento                 text,
  bairro                      text,
  cep                         text,
  uf                          text,
  municipio                   text,
  ddd_1                       text,
  telefone_1                  text,
  ddd_2                       text,
  telefone_2                  text,
  ddd_fax                     text,
  fax                         text,
  correio_eletronico          text,
  situacao_especial           text,
  data_situacao_especial      date,
  cnpj                        text,
  extra                       jsonb,
  snapshot_id                 bigint
);

CREATE TABLE snap.cnpj_socios__template (
  cnpj_basico                      text,
  identificador_de_socio           text,
  nome_socio                       text,
  cnpj_cpf_do_socio                text,
  qualificacao_socio               text,
  data_entrada_sociedade           date,
  pais                             text,
  representante_legal              text,
  nome_do_representante            text,
  qualificacao_representante_legal text,
  faixa_etaria                     smallint,
  socio_chave                      text,
  cpf_miolo                        text,
  extra                            jsonb,
  snapshot_id                      bigint
);

CREATE TABLE snap.cnpj_simples__template (
  cnpj_basico           text,
  opcao_pelo_simples    text,
  data_opcao_simples    date,
  data_exclusao_simples date,
  opcao_mei             text,
  data_opcao_mei        date,
  data_exclusao_mei     date,
  extra                 jsonb,
  snapshot_id           bigint
);

CREATE TABLE snap.cnpj_cnaes__template (codigo text, descricao text, extra jsonb, snapshot_id bigint);
CREATE TABLE snap.cnpj_motivos__template (codigo text, descricao text, extra jsonb, snapshot_id bigint);
CREATE TABLE snap.cnpj_municipios__template (codigo text, descricao text, uf text, codigo_ibge text, extra jsonb, snapshot_id bigint);
CREATE TABLE snap.cnpj_naturezas__template (codigo text, descricao text, extra jsonb, snapshot_id bigint);
CREATE TABLE snap.cnpj_paises__template (codigo text, descricao text, extra jsonb, snapshot_id bigint);
CREATE TABLE snap.cnpj_qualificacoes__template (codigo text, descricao text, extra jsonb, snapshot_id bigint);

CREATE VIEW "current".cnpj_empresas AS SELECT * FROM snap.cnpj_empresas__template;
CREATE VIEW "current".cnpj_estabelecimentos AS SELECT * FROM snap.cnpj_estabelecimentos__template;
CREATE VIEW "current".cnpj_socios AS SELECT * FROM snap.cnpj_socios__template;
CREATE VIEW "current".cnpj_simples AS SELECT * FROM snap.cnpj_simples__template;
CREATE VIEW "current".cnpj_cnaes AS SELECT * FROM snap.cnpj_cnaes__template;
CREATE VIEW "current".cnpj_motivos AS SELECT * FROM snap.cnpj_motivos__template;
CREATE VIEW "current".cnpj_municipios AS SELECT * FROM snap.cnpj_municipios__template;
CREATE VIEW "current".cnpj_naturezas AS SELECT * FROM snap.cnpj_naturezas__template;
CREATE VIEW "current".cnpj_paises AS SELECT * FROM snap.cnpj_paises__template;
CREATE VIEW "current".cnpj_qualificacoes AS SELECT * FROM snap.cnpj_qualificacoes__template;

-- ---------------------------------------------------------------------------------
-- The read interface (contract §2b): Receita's column names. razao_social never carries
-- the owner's CPF (cut at load time, kept masked in cpf_titular_mascarado); partner CPFs
-- are masked at the source (`***NNNNNN**`), cpf_miolo holds their six visible digits.
CREATE VIEW serving.cnpj_empresas AS
SELECT e.cnpj_basico, e.razao_social, e.natureza_juridica, e.qualificacao_responsavel, e.capital_social,
       e.porte, e.ente_federativo_responsavel, e.cpf_titular_mascarado, e.snapshot_id
FROM "current".cnpj_empresas e;

-- municipio stays Receita's TOM code; codigo_municipio_ibge comes from the month's crosswalk
-- (NULL when unmatched or when ibge-municipios was not loaded; counted in the report).
CREATE VIEW serving.cnpj_estabelecimentos AS
SELECT e.cnpj, e.cnpj_basico, e.cnpj_ordem, e.cnpj_dv, e.identificador_matriz_filial, e.nome_fantasia,
       e.situacao_cadastral, e.data_situacao_cadastral, e.motivo_situacao_cadastral, e.nome_cidade_exterior,
       e.pais, e.data_inicio_atividade, e.cnae_fiscal_principal, e.cnae_fiscal_secundaria, e.tipo_logradouro,
       e.logradouro, e.numero, e.complemento, e.bairro, e.cep, e.uf, e.municipio,
       m.descricao AS municipio_nome, m.codigo_ibge AS codigo_municipio_ibge,
       e.ddd_1, e.telefone_1, e.ddd_2, e.telefone_2, e.ddd_fax, e.fax, e.correio_eletronico,
       e.situacao_especial, e.data_situacao_especial, e.snapshot_id
FROM "current".cnpj_estabelecimentos e
LEFT JOIN "current".cnpj_municipios m ON m.codigo = e.municipio AND m.snapshot_id = e.snapshot_id;

CREATE VIEW serving.cnpj_socios AS
SELECT s.cnpj_basico, s.socio_chave, s.identificador_de_socio, s.nome_socio, s.cnpj_cpf_do_socio, s.cpf_miolo,
       s.qualificacao_socio, s.data_entrada_sociedade, s.pais, s.representante_legal, s.nome_do_representante,
       s.qualificacao_representante_legal, s.faixa_etaria, s.snapshot_id
FROM "current".cnpj_socios s;

CREATE VIEW serving.cnpj_simples AS
SELECT cnpj_basico, opcao_pelo_simples, data_opcao_simples, data_exclusao_simples, opcao_mei, data_opcao_mei,
       data_exclusao_mei, snapshot_id
FROM "current".cnpj_simples;

CREATE VIEW serving.cnpj_cnaes AS SELECT codigo, descricao, snapshot_id FROM "current".cnpj_cnaes;
CREATE VIEW serving.cnpj_motivos AS SELECT codigo, descricao, snapshot_id FROM "current".cnpj_motivos;
CREATE VIEW serving.cnpj_municipios AS SELECT codigo, descricao, uf, codigo_ibge, snapshot_id FROM "current".cnpj_municipios;
CREATE VIEW serving.cnpj_naturezas AS SELECT codigo, descricao, snapshot_id FROM "current".cnpj_naturezas;
CREATE VIEW serving.cnpj_paises AS SELECT codigo, descricao, snapshot_id FROM "current".cnpj_paises;
CREATE VIEW serving.cnpj_qualificacoes AS SELECT codigo, descricao, snapshot_id FROM "current".cnpj_qualificacoes;

-- ---------------------------------------------------------------------------------
-- Partner-list changes of a month against the month current when it was loaded, one row
-- per company whose list changed (by socio_chave): who entered, who left. Feeds the
-- socio.qsa.alterado events (contract §5). Documents inside are as Receita publishes them
-- (CPFs masked at the source).
CREATE TABLE derived.cnpj_qsa_changes (
  snapshot_id          bigint NOT NULL REFERENCES etl.snapshots (snapshot_id) ON DELETE CASCADE,
  previous_snapshot_id bigint NOT NULL,
  cnpj_basico          text NOT NULL,
  entraram             jsonb NOT NULL,
  sairam               jsonb NOT NULL,
  PRIMARY KEY (snapshot_id, cnpj_basico)
);
